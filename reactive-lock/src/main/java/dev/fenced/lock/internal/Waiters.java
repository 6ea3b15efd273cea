package dev.fenced.lock.internal;

import dev.fenced.lock.LockClientClosedException;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * The acquires of one client that wait for a held lock: every waiter, so that close can end them, and the
 * wait queue of each lock name. Thread-safe.
 */
final class Waiters implements Handoffs {

    private final LeaseStore store;
    private final Set<AcquireWaiter> all = ConcurrentHashMap.newKeySet();
    private final Map<String, WaitQueue> queues = new ConcurrentHashMap<>();
    private volatile boolean closed;

    Waiters(LeaseStore store) {
        this.store = store;
    }

    /** Registers a waiter so that close can end it; false once the client is closed. */
    boolean register(AcquireWaiter waiter) {
        all.add(waiter);
        if (closed) {
            all.remove(waiter);
            return false;
        }
        return true;
    }

    void unregister(AcquireWaiter waiter) {
        all.remove(waiter);
    }

    boolean hasWaiters(String name) {
        WaitQueue queue = queues.get(name);
        return queue != null && queue.hasWaiters();
    }

    /** How many acquires of this client wait for {@code name}. */
    int waiting(String name) {
        WaitQueue queue = queues.get(name);
        return queue == null ? 0 : queue.size();
    }

    WaitQueue queue(String name) {
        return queues.computeIfAbsent(name, n -> new WaitQueue(store, n, queues));
    }

    @Override
    public @Nullable Mono<Boolean> handOff(HeldLease releasing) {
        WaitQueue queue = queues.get(releasing.name());
        return queue == null || closed ? null : queue.handOff(releasing);
    }

    /** Whether the client has begun to close. */
    boolean isClosed() {
        return closed;
    }

    /** On close: every waiter ends with {@link LockClientClosedException}, and no new one may register. */
    void close() {
        closed = true;
        for (AcquireWaiter waiter : List.copyOf(all)) {
            waiter.fail(LockClientClosedException.of(waiter.name()));
        }
    }
}
