package dev.fenced.lock.internal;

import java.util.ArrayList;
import java.util.List;
import reactor.core.publisher.Mono;

/**
 * The store commands that the lifecycle sends on its own (releases, undos of abandoned acquires, acquires
 * in flight), so that closing lets them finish before it closes the connections: a release cut off by
 * close would leave its lock held for a whole lease. Thread-safe; the count is guarded by the monitor.
 */
final class InFlight {

    private int count;
    private final List<Runnable> whenIdle = new ArrayList<>();

    /**
     * Counts {@code command} as in flight from its subscription until it terminates or is cancelled.
     *
     * @param command the command
     * @param <T> its result type
     * @return the counted command
     */
    <T> Mono<T> track(Mono<T> command) {
        return Mono.defer(() -> {
            synchronized (this) {
                count++;
            }
            return command.doFinally(signal -> done());
        });
    }

    private void done() {
        List<Runnable> idle;
        synchronized (this) {
            if (--count > 0 || whenIdle.isEmpty()) {
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
                if (count > 0) {
                    whenIdle.add(sink::success);
                    return;
                }
            }
            sink.success();
        });
    }
}
