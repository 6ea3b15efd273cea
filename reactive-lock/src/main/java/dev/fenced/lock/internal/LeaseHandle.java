package dev.fenced.lock.internal;

import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.ReleaseOutcome;
import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * The lease as the application holds it: the one object an acquire emits, over the {@link HeldLease} that the
 * renewer keeps. The renewer holds only the internal lease, never this handle, so a handle that no code can reach
 * any more (the loser of {@code Mono.firstWithSignal} drops its lease, which no hook sees) can be collected; its
 * lease is then released, since nobody could release it or check it any more. That is bounded by the garbage
 * collector, not by a timer; {@code maxHold} stays the hard bound. A scope keeps its handle reachable while its
 * work runs (the Reactor Context, {@code withLease}), and so does a subscriber of {@link #lost()} or a Mono that
 * {@link #release()} returned. Thread-safe.
 */
final class LeaseHandle extends ForwardingLease {

    private static final Logger log = Loggers.getLogger(LeaseHandle.class);

    /** One daemon thread for the JVM; its actions only start a release, never block. */
    private static final Cleaner CLEANER = Cleaner.create();

    private final HeldLease lease;

    private LeaseHandle(HeldLease lease) {
        super(lease);
        this.lease = lease;
    }

    /**
     * The handle of a lease, registered so that the lease is released once the handle is collected.
     *
     * @param lease the lease
     * @return its handle
     */
    static LeaseHandle of(HeldLease lease) {
        LeaseHandle handle = new LeaseHandle(lease);
        CLEANER.register(handle, new ReleaseUnreachable(lease));
        return handle;
    }

    HeldLease lease() {
        return lease;
    }

    @Override
    public Mono<LeaseLostException> lost() {
        return reachableWhile(lease.lost());
    }

    @Override
    public Mono<ReleaseOutcome> release() {
        return reachableWhile(lease.release());
    }

    @Override
    public Mono<ReleaseOutcome> releaseNoSoonerThan(java.time.Duration sinceGrant) {
        return reachableWhile(lease.releaseNoSoonerThan(sinceGrant));
    }

    @Override
    public Mono<Boolean> resetMaxHold(java.time.Duration fromNow) {
        return reachableWhile(lease.resetMaxHold(fromNow));
    }

    /** The Mono, holding this handle until it ends: whoever holds or subscribed to it can still use the lease. */
    private <T> Mono<T> reachableWhile(Mono<T> mono) {
        return mono.doFinally(signal -> Reference.reachabilityFence(this));
    }

    /** Releases a lease whose handle was collected; holds the lease only, never the handle. */
    private record ReleaseUnreachable(HeldLease lease) implements Runnable {

        @Override
        public void run() {
            if (lease.isActive()) {
                log.warn("Lease on lock '{}' with fencing token {} became unreachable while held (no code kept its "
                        + "handle: a subscriber dropped it, as the loser of Mono.firstWithSignal does, or kept only its "
                        + "token): releasing it", lease.name(), lease.token());
                lease.releaseQuietly().subscribe();
            }
        }
    }
}
