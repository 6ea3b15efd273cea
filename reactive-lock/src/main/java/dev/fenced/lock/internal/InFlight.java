package dev.fenced.lock.internal;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import reactor.core.publisher.Mono;

/**
 * The store commands that the lifecycle sends on its own (releases, undos of abandoned acquires, acquires
 * in flight), so that closing lets them finish before it closes the connections: a release cut off by
 * close would leave its lock held for a whole lease. Thread-safe. The count is lock-free, since every acquire
 * and release passes here; the monitor guards only the callbacks of {@link #idle()}, which only close asks for.
 */
final class InFlight {

    private final AtomicInteger count = new AtomicInteger();
    // Set once someone waits for idle: until then a command that ends need not look at the callbacks.
    private volatile boolean watched;
    private final List<Runnable> whenIdle = new ArrayList<>(); // guarded by this

    /**
     * Counts {@code command} as in flight from its subscription until it terminates or is cancelled.
     *
     * @param command the command
     * @param <T> its result type
     * @return the counted command
     */
    <T> Mono<T> track(Mono<T> command) {
        return Mono.defer(() -> {
            count.incrementAndGet();
            return command.doFinally(signal -> done());
        });
    }

    private void done() {
        if (count.decrementAndGet() == 0 && watched) {
            runIdleCallbacks();
        }
    }

    /** Runs the callbacks waiting for idle, if nothing is in flight now (another command may have started). */
    private void runIdleCallbacks() {
        List<Runnable> idle;
        synchronized (this) {
            if (count.get() > 0 || whenIdle.isEmpty()) {
                return;
            }
            idle = new ArrayList<>(whenIdle);
            whenIdle.clear();
        }
        idle.forEach(Runnable::run);
    }

    /**
     * Completes when no tracked command is in flight (at once if none is).
     *
     * @return completion
     */
    Mono<Void> idle() {
        return Mono.create(sink -> {
            synchronized (this) {
                whenIdle.add(sink::success);
                watched = true;
            }
            // A command that ended before watched was set did not look: look now.
            runIdleCallbacks();
        });
    }
}
