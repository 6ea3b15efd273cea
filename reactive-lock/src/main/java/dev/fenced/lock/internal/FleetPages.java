package dev.fenced.lock.internal;

import java.util.List;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The paging of the fleet view, one implementation for every store: a page is fetched only when the subscriber
 * has asked for more than the pages already fetched hold, so a slow subscriber holds at most the page it is
 * reading and the next one, however many locks there are.
 *
 * <p>Thread-safe (stateless).
 */
public final class FleetPages {

    /** The most locks one page asks the server for (the {@code COUNT} of a {@code SCAN}, the {@code LIMIT} of SQL). */
    public static final int PAGE_SIZE = 500;

    private FleetPages() {
    }

    /**
     * The locks of every page, in page order.
     *
     * @param first where the first page starts
     * @param fetch fetches the page that starts at a position (cold)
     * @param <C> the position: a scan cursor, the last name of the previous page
     * @return the locks
     */
    public static <C> Flux<LeaseStore.LockState> stream(C first, Function<C, Mono<Page<C>>> fetch) {
        // expand subscribes to the next page only once the previous one has completed, and requests it only on
        // demand; concatMapIterable with a prefetch of one asks for a page only when it starts reading the last.
        return Mono.defer(() -> fetch.apply(first))
                .expand(page -> page.next() == null ? Mono.empty() : Mono.defer(() -> fetch.apply(page.next())))
                .concatMapIterable(Page::locks, 1);
    }

    /**
     * One page.
     *
     * @param locks the held locks of the page (possibly none, when no key of the page matched)
     * @param next where the next page starts, or {@code null} after the last page
     * @param <C> the position type
     */
    public record Page<C>(List<LeaseStore.LockState> locks, @Nullable C next) {
    }
}
