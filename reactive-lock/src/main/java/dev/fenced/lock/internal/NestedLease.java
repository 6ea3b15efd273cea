package dev.fenced.lock.internal;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.ReleaseOutcome;
import dev.fenced.lock.StaleFencingTokenException;
import java.time.Duration;
import reactor.core.publisher.Mono;

/**
 * A view of a lease held by an enclosing scope: everything but release is the lease itself; release
 * leaves it to the scope that acquired it. Thread-safe.
 */
final class NestedLease implements FencedLease {

    private final FencedLease outer;

    NestedLease(FencedLease outer) {
        this.outer = outer instanceof NestedLease nested ? nested.outer : outer;
    }

    FencedLease outer() {
        return outer;
    }

    @Override
    public String name() {
        return outer.name();
    }

    @Override
    public long token() {
        return outer.token();
    }

    @Override
    public String lockId() {
        return outer.lockId();
    }

    @Override
    public String ownerId() {
        return outer.ownerId();
    }

    @Override
    public Duration leaseTime() {
        return outer.leaseTime();
    }

    @Override
    public Duration remainingValidity() {
        return outer.remainingValidity();
    }

    @Override
    public boolean isHeld() {
        return outer.isHeld();
    }

    @Override
    public Mono<LeaseLostException> lost() {
        return outer.lost();
    }

    @Override
    public void reportRejectedWrite(StaleFencingTokenException rejection) {
        outer.reportRejectedWrite(rejection);
    }

    @Override
    public Mono<ReleaseOutcome> release() {
        return Mono.just(ReleaseOutcome.RETAINED);
    }

    @Override
    public String toString() {
        return "NestedLease{" + outer + "}";
    }
}
