package dev.fenced.lock.internal;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;

/**
 * The waiters of one lock name in one client, in arrival order. The queue, not each waiter, listens for the
 * lock's release notifications, and only its head is active: a notification wakes the head alone (waking
 * all would send one attempt per waiter for every release, a thundering herd, when only one can win), and
 * only the head keeps a timer bounded by the holder's lease (pub/sub is at-most-once). The others wait for
 * their turn and cost nothing. When the head leaves with the lock, the next waiter becomes head and waits
 * for that holder in turn; when it leaves without the lock, the next is woken in its place, so that no
 * wake-up is lost. Leaving is O(1). The queue stops listening, and removes itself, with its last waiter.
 *
 * <p>State is guarded by the queue's monitor; waiters are called outside it.
 */
final class WaitQueue {

    private final LeaseStore store;
    private final String name;
    private final Map<String, WaitQueue> registry;
    private final LinkedHashSet<AcquireWaiter> waiters = new LinkedHashSet<>();
    private boolean subscribed;
    private boolean confirmed;
    private boolean removed;
    private @Nullable Disposable subscription;


    WaitQueue(LeaseStore store, String name, Map<String, WaitQueue> registry) {
        this.store = store;
        this.name = name;
        this.registry = registry;
    }

    /**
     * Adds a waiter at the end of the line. Once listening is confirmed (at once if it already is), the waiter
     * is told {@link AcquireWaiter#onListening(boolean)}, with whether it is the head.
     *
     * @param waiter the waiter
     * @param maxWaiters how many waiters the queue may hold
     * @return {@link Joined#REMOVED} if this queue was removed meanwhile (join a fresh one), {@link Joined#FULL}
     *     if it holds {@code maxWaiters} already
     */
    Joined join(AcquireWaiter waiter, int maxWaiters) {
        boolean readyNow;
        boolean head;
        boolean subscribeNow;
        synchronized (this) {
            if (removed) {
                return Joined.REMOVED;
            }
            if (waiters.size() >= maxWaiters) {
                return Joined.FULL;
            }
            head = waiters.isEmpty();
            waiters.add(waiter);
            readyNow = confirmed;
            subscribeNow = !subscribed;
            subscribed = true;
        }
        if (subscribeNow) {
            Disposable d = store.releases(name).subscribe(count -> onSignal(), this::onFailure);
            boolean disposeNow;
            synchronized (this) {
                disposeNow = removed;
                if (!removed) {
                    subscription = d;
                }
            }
            if (disposeNow) {
                d.dispose();
            }
        }
        if (readyNow) {
            waiter.onListening(head);
        }
        return Joined.JOINED;
    }

    /** What {@link #join} did. */
    enum Joined {
        /** The waiter is in line. */
        JOINED,
        /** The queue was removed as its last waiter left: join a fresh one. */
        REMOVED,
        /** The queue holds as many waiters as allowed. */
        FULL
    }

    synchronized boolean hasWaiters() {
        return !waiters.isEmpty();
    }

    synchronized int size() {
        return waiters.size();
    }

    /**
     * Removes a waiter.
     *
     * @param waiter the waiter
     * @param withLock whether it leaves holding the lock (or failed by the lock service): the next waiter then
     *     becomes head and waits with its timer; otherwise the next is woken in its place, since a wake-up the
     *     leaving waiter received must not be lost
     */
    void leave(AcquireWaiter waiter, boolean withLock) {
        AcquireWaiter next = null;
        Disposable toDispose = null;
        synchronized (this) {
            boolean wasHead = head() == waiter;
            if (!waiters.remove(waiter)) {
                return;
            }
            if (waiters.isEmpty()) {
                removed = true;
                toDispose = subscription;
                registry.remove(name, this);
            } else if (wasHead && confirmed) {
                next = head();
            }
        }
        if (toDispose != null) {
            toDispose.dispose();
        }
        if (next != null) {
            if (withLock) {
                next.onBecameHead();
            } else {
                next.onNotification();
            }
        }
    }

    /**
     * Offers the lock of a releasing lease of this client to the head of the line.
     *
     * @param releasing the lease being released
     * @return whether the releasing lease held the lock, if the head took the lock over; {@code null} if it did
     *     not (not listening yet, or no waiter free to take it)
     */
    @Nullable Mono<Boolean> handOff(HeldLease releasing) {
        AcquireWaiter head;
        synchronized (this) {
            if (removed || !confirmed) {
                return null;
            }
            head = head();
        }
        return head == null ? null : head.takeOver(releasing);
    }

    // Guarded by this.
    private @Nullable AcquireWaiter head() {
        Iterator<AcquireWaiter> it = waiters.iterator();
        return it.hasNext() ? it.next() : null;
    }

    private void onSignal() {
        List<AcquireWaiter> nowListening = null;
        AcquireWaiter head;
        synchronized (this) {
            head = head();
            if (!confirmed) {
                confirmed = true;
                nowListening = new ArrayList<>(waiters);
            }
        }
        if (nowListening != null) {
            for (AcquireWaiter w : nowListening) {
                w.onListening(w == head);
            }
        } else if (head != null) {
            head.onNotification();
        }
    }

    private void onFailure(Throwable error) {
        List<AcquireWaiter> all;
        synchronized (this) {
            // Listening failed: the waiters go on with timers alone, and the next waiter to join listens anew.
            confirmed = false;
            subscribed = false;
            subscription = null;
            all = new ArrayList<>(waiters);
        }
        all.forEach(w -> w.onWatchFailed(error));
    }
}
