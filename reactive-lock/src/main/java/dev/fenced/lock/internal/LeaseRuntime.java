package dev.fenced.lock.internal;

import dev.fenced.lock.LockObserver;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import reactor.core.scheduler.Scheduler;

/**
 * What the parts of one client's lease lifecycle share: the settings, the store, the scheduler and its
 * monotonic clock, the key layout, the store commands that close must let finish, and the token floors.
 * Handed to each part instead of the client, so that nothing calls back into the client. Immutable; its
 * parts are thread-safe.
 *
 * @param settings the client's settings
 * @param store the lease store
 * @param keys the key layout, for lock ids
 * @param inFlight store commands of the lifecycle still running
 * @param floors token floors reported by storage
 */
record LeaseRuntime(ClientSettings settings, LeaseStore store, KeyLayout keys, InFlight inFlight, TokenFloors floors) {

    static LeaseRuntime of(ClientSettings settings, LeaseStore store) {
        return new LeaseRuntime(settings, store, new KeyLayout(settings.keyPrefix()), new InFlight(), new TokenFloors());
    }

    Scheduler scheduler() {
        return settings.scheduler();
    }

    LockObserver observer() {
        return settings.observer();
    }

    Duration commandTimeout() {
        return settings.commandTimeout();
    }

    /**
     * The monotonic clock of deadlines: {@link System#nanoTime()}, except on a virtual-time scheduler, whose
     * virtual time is the clock. (A real Reactor scheduler's {@code now()} is wall-clock time in milliseconds,
     * which can jump.)
     *
     * @return nanoseconds
     */
    long now() {
        return settings.virtualTime() ? settings.scheduler().now(TimeUnit.NANOSECONDS) : System.nanoTime();
    }
}
