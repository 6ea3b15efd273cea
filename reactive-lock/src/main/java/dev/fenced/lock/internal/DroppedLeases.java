package dev.fenced.lock.internal;

import java.util.function.Consumer;
import reactor.core.publisher.Hooks;
import reactor.core.publisher.Operators;
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
 * (a user's lambda subscriber) is reached only by the global hook, which every client checks when it is built.
 */
public final class DroppedLeases {

    /** The Context key under which Reactor looks for a subscriber-local {@code onNextDropped} handler. */
    static final String KEY = "reactor.onNextDropped.local";

    private static final Logger log = Loggers.getLogger(DroppedLeases.class);

    private static final Consumer<Object> RELEASE = DroppedLeases::release;

    /** Recognised by the global handler only: shows whether the handler is still in Reactor's hook. */
    private static final Object PROBE = new Object() {
        @Override
        public String toString() {
            return "a probe of the Fenced onNextDropped hook (ignore it)";
        }
    };

    /** Set by the global handler when it sees {@link #PROBE}; read under the class lock. */
    private static volatile boolean probeSeen;

    private static boolean installedBefore;

    /** How often the handler was added to Reactor's hook, for tests: the chain must not grow with every client. */
    static int additions;

    private static final Consumer<Object> GLOBAL = dropped -> {
        if (dropped == PROBE) {
            probeSeen = true;
        } else if (dropped instanceof HeldLease || dropped instanceof LeaseHandle || dropped instanceof AcquireAttempt.Result
                || dropped instanceof dev.fenced.lock.FencedLeaseBatch) {
            release(dropped);
        }
    };

    private DroppedLeases() {
    }

    /**
     * Makes sure Reactor's global {@code Hooks.onNextDropped} hook holds a handler that releases dropped leases,
     * and adds it if not: the first time, and again after other code removed it ({@code Hooks.resetOnNextDropped()},
     * which test set-ups call). It checks by dropping a probe value that only this handler recognises. Reactor's
     * hook is cumulative, so handlers installed by others keep running; values other than leases are ignored.
     */
    public static synchronized void installGlobalHook() {
        probeSeen = false;
        try {
            Operators.onNextDropped(PROBE, Context.empty());
        } catch (RuntimeException e) {
            // A handler of others threw (Hooks.onNextDroppedFail() throws on every value): handlers after it never
            // run, so whether ours is there cannot be told, and adding it once more would only lengthen the chain
            // at every build. Add it the first time only.
            log.debug("A handler in Reactor's onNextDropped hook threw on the probe: {}", e.toString());
            if (!installedBefore) {
                add();
            }
            return;
        }
        if (probeSeen) {
            return;
        }
        if (installedBefore) {
            log.info("Reactor's onNextDropped hook no longer holds the handler that releases dropped leases (other code "
                    + "called Hooks.resetOnNextDropped()): added it again");
        }
        add();
    }

    private static void add() {
        Hooks.onNextDropped(GLOBAL);
        installedBefore = true;
        additions++;
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
        if (dropped instanceof dev.fenced.lock.FencedLeaseBatch batch) {
            // A batch of tryAcquireAll: its leases, as each would be alone.
            log.debug("A lease batch was dropped as its subscriber cancelled: releasing {}", batch);
            LeaseBatches.releaseDiscarded(batch);
            return;
        }
        HeldLease lease = dropped instanceof dev.fenced.lock.FencedLease l ? HeldLease.of(l)
                : dropped instanceof AcquireAttempt.Result result ? result.lease() : null;
        if (lease != null) {
            log.debug("A lease was dropped as its subscriber cancelled: releasing {}", lease);
            lease.releaseQuietly().subscribe();
        } else {
            log.debug("onNextDropped: {}", dropped);
        }
    }
}
