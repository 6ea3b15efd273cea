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

    /**
     * How many times in a row a lease of this client may hand a lock to the client's next waiter: then one
     * release goes to everyone (a notification, and the waiters of other clients attempt too), so that a client
     * whose own waiters never run out cannot keep the lock from others.
     */
    static final int MAX_HANDOFFS_IN_A_ROW = 16;

    // Per lock name, kept apart from the wait queue, which goes away whenever its last waiter leaves (a client
    // whose acquires wait one at a time would otherwise start counting again at every hand-off).
    private final Map<String, Integer> handoffsInARow = new ConcurrentHashMap<>();

    @Override
    public @Nullable Mono<Boolean> handOff(HeldLease releasing) {
        String name = releasing.name();
        WaitQueue queue = queues.get(name);
        if (queue == null || closed) {
            // A plain release: the count in a row starts again. The map is empty unless locks are contended, so an
            // uncontended release pays one read of it, not a removal.
            if (!handoffsInARow.isEmpty()) {
                handoffsInARow.remove(name);
            }
            return null;
        }
        int[] turn = new int[1];
        handoffsInARow.compute(name, (n, count) -> {
            turn[0] = count == null ? 1 : count + 1;
            return turn[0] > MAX_HANDOFFS_IN_A_ROW ? null : turn[0];
        });
        if (turn[0] > MAX_HANDOFFS_IN_A_ROW) {
            return null; // this release goes to everyone
        }
        Mono<Boolean> released = queue.handOff(releasing);
        if (released == null) {
            handoffsInARow.remove(name); // released to everyone after all
        }
        return released;
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
