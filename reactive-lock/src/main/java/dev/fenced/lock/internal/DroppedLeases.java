package dev.fenced.lock.internal;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import reactor.core.publisher.Hooks;
import reactor.util.Logger;
import reactor.util.Loggers;
import reactor.util.context.Context;
import reactor.util.context.ContextView;

/**
 * Releases a lease that Reactor drops instead of delivering or discarding it.
 *
 * <p>A {@code Mono.create} sink cancelled in the very moment it emits can take the cancellation for a
 * completed emission and drop the value with {@code Operators.onNextDropped}, which no discard hook sees. A
 * lease dropped there would be renewed until the client closes. Reactor looks up a drop handler in the
 * subscriber's Context under {@value #KEY} before its global hook, so the acquire pipeline puts one there.
 * Values other than leases are only logged, as Reactor's default does. A subscriber outside the pipeline
 * (a user's lambda subscriber) is reached only by the global hook, installed on request.
 */
public final class DroppedLeases {

    /** The Context key under which Reactor looks for a subscriber-local {@code onNextDropped} handler. */
    static final String KEY = "reactor.onNextDropped.local";

    private static final Logger log = Loggers.getLogger(DroppedLeases.class);

    private static final Consumer<Object> RELEASE = DroppedLeases::release;

    private static final AtomicBoolean INSTALLED = new AtomicBoolean();

    private DroppedLeases() {
    }

    /**
     * Adds, once per JVM, a global {@code Hooks.onNextDropped} handler that releases dropped leases. Reactor's
     * hook is cumulative, so handlers installed by others keep running; values other than leases are ignored.
     */
    public static void installGlobalHook() {
        if (INSTALLED.compareAndSet(false, true)) {
            Hooks.onNextDropped(dropped -> {
                if (dropped instanceof HeldLease || dropped instanceof AcquireAttempt.Result) {
                    release(dropped);
                }
            });
        }
    }

    /**
     * The Context with the handler added.
     *
     * @param context a subscriber's Context
     * @return the Context with the handler
     */
    static Context releaseIn(Context context) {
        return context.put(KEY, RELEASE);
    }

    /**
     * A Context holding only the handler, for an internal subscriber.
     *
     * @return the Context
     */
    static ContextView context() {
        return Context.of(KEY, RELEASE);
    }

    private static void release(Object dropped) {
        HeldLease lease = dropped instanceof HeldLease held ? held
                : dropped instanceof AcquireAttempt.Result result ? result.lease() : null;
        if (lease != null) {
            log.debug("A lease was dropped as its subscriber cancelled: releasing {}", lease);
            lease.releaseQuietly().subscribe();
        } else {
            log.debug("onNextDropped: {}", dropped);
        }
    }
}
