package dev.fenced.lock.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

class FleetPagesTest {

    private final AtomicInteger fetched = new AtomicInteger();

    /** Pages of {@code size} locks, {@code pages} of them; counts the pages actually read. */
    private Mono<FleetPages.Page<Integer>> page(int at, int size, int pages) {
        return Mono.fromCallable(() -> {
            fetched.incrementAndGet();
            List<LeaseStore.LockState> locks = new ArrayList<>();
            for (int i = 0; i < size; i++) {
                locks.add(new LeaseStore.LockState("lock-" + (at * size + i), at * size + i + 1, 1_000, null));
            }
            return new FleetPages.Page<>(locks, at + 1 < pages ? at + 1 : null);
        });
    }

    @Test
    void aSubscriberThatRequestsOneAtATimeCausesAtMostOnePageBeyondTheOneItReads() {
        StepVerifier.create(FleetPages.stream(0, at -> page(at, 100, 200)), 1)
                .expectNextCount(1)
                .then(() -> assertThat(fetched.get()).as("pages read for one lock").isLessThanOrEqualTo(2))
                .thenRequest(99)
                .expectNextCount(99)
                .then(() -> assertThat(fetched.get()).as("pages read for one page of locks").isLessThanOrEqualTo(2))
                .thenRequest(1)
                .expectNextCount(1)
                .then(() -> assertThat(fetched.get()).as("pages read for a page and one lock").isLessThanOrEqualTo(3))
                .thenCancel()
                .verify();
        assertThat(fetched.get()).isLessThanOrEqualTo(3);
    }

    @Test
    void everyLockOfEveryPageIsListedOnceInOrderAndEmptyPagesAreSkipped() {
        List<String> names = FleetPages.<Integer>stream(0, at -> at % 3 == 1
                        ? Mono.just(new FleetPages.Page<>(List.of(), at + 1))
                        : page(at, 10, 30))
                .map(LeaseStore.LockState::name)
                .collectList()
                .block();
        assertThat(names).hasSize(20 * 10).doesNotHaveDuplicates();
        assertThat(names.get(0)).isEqualTo("lock-0");
    }

    @Test
    void aFailedPageFailsTheViewAndNoFurtherPageIsRead() {
        IllegalStateException boom = new IllegalStateException("boom");
        StepVerifier.create(FleetPages.<Integer>stream(0, at -> at == 1 ? Mono.error(boom) : page(at, 5, 10)))
                .expectNextCount(5)
                .verifyErrorMatches(e -> e == boom);
        assertThat(fetched.get()).isEqualTo(1);
    }
}
