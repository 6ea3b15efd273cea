package dev.fenced.lock.internal;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.ReleaseOutcome;
import reactor.core.publisher.Mono;

/**
 * A view of a lease held by an enclosing scope: everything but release is the lease itself; release
 * leaves it to the scope that acquired it. Thread-safe.
 */
final class NestedLease extends ForwardingLease {

    private final FencedLease outer;

    NestedLease(FencedLease outer) {
        super(outermost(outer));
        this.outer = outermost(outer);
    }

    private static FencedLease outermost(FencedLease lease) {
        return lease instanceof NestedLease nested ? nested.outer : lease;
    }

    FencedLease outer() {
        return outer;
    }

    @Override
    public Mono<ReleaseOutcome> release() {
        return Mono.just(ReleaseOutcome.RETAINED);
    }

    /** The tail, like the release, is the enclosing scope's to decide. */
    @Override
    public Mono<ReleaseOutcome> releaseNoSoonerThan(java.time.Duration sinceGrant) {
        return Mono.just(ReleaseOutcome.RETAINED);
    }

    @Override
    public String toString() {
        return "NestedLease{" + outer + "}";
    }
}
