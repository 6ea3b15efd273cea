package dev.fenced.lock.internal;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import reactor.core.Disposable;

/**
 * The waiters of one lock name in one client. The queue, not each waiter, listens for the lock's release
 * notifications, and a notification wakes only the oldest waiter: waking them all would send one attempt
 * per waiter for every release (a thundering herd) when only one can win. A waiter that leaves without the
 * lock passes the wake-up on to the next. The queue stops listening, and removes itself, when its last
 * waiter leaves.
 *
 * <p>State is guarded by the queue's monitor; waiters are called outside it.
 */
final class WaitQueue {

    private final LeaseStore store;
    private final String name;
    private final Map<String, WaitQueue> registry;
    private final ArrayDeque<AcquireWaiter> waiters = new ArrayDeque<>();
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
     * Adds a waiter, which is told {@link AcquireWaiter#onReady()} once listening is confirmed (at once if
     * it already is).
     *
     * @return false if this queue was removed meanwhile; join a fresh one
     */
    boolean join(AcquireWaiter waiter) {
        boolean readyNow;
        boolean behindOthers;
        boolean subscribeNow;
        synchronized (this) {
            if (removed) {
                return false;
            }
            behindOthers = !waiters.isEmpty();
            waiters.addLast(waiter);
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
            if (behindOthers) {
                // A release we may have missed woke a waiter ahead of us: no need to check again now.
                waiter.onReadyBehindOthers();
            } else {
                waiter.onReady();
            }
        }
        return true;
    }

    synchronized boolean hasWaiters() {
        return !waiters.isEmpty();
    }

    /**
     * Removes a waiter.
     *
     * @param waiter the waiter
     * @param wakeNext whether the next waiter should make an attempt in its place (the leaving waiter did
     *     not take the lock, so a wake-up it may have received must not be lost)
     */
    void leave(AcquireWaiter waiter, boolean wakeNext) {
        AcquireWaiter next = null;
        Disposable toDispose = null;
        synchronized (this) {
            waiters.remove(waiter);
            if (waiters.isEmpty()) {
                removed = true;
                toDispose = subscription;
                registry.remove(name, this);
            } else if (wakeNext) {
                next = waiters.peekFirst();
            }
        }
        if (toDispose != null) {
            toDispose.dispose();
        }
        if (next != null) {
            next.onNotification();
        }
    }

    private void onSignal() {
        List<AcquireWaiter> nowReady = null;
        AcquireWaiter head = null;
        synchronized (this) {
            if (!confirmed) {
                confirmed = true;
                nowReady = new ArrayList<>(waiters);
            } else {
                head = waiters.peekFirst();
            }
        }
        if (nowReady != null) {
            nowReady.forEach(AcquireWaiter::onReady);
        }
        if (head != null) {
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
