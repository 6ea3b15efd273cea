package dev.fenced.lock.internal;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.ReleaseOutcome;
import dev.fenced.lock.StaleFencingTokenException;
import java.time.Duration;
import reactor.core.publisher.Mono;

/** A lease that is another lease in all but what a subclass overrides. Thread-safe if the other lease is. */
abstract class ForwardingLease implements FencedLease {

    private final FencedLease delegate;

    ForwardingLease(FencedLease delegate) {
        this.delegate = delegate;
    }

    @Override
    public String name() {
        return delegate.name();
    }

    @Override
    public long token() {
        return delegate.token();
    }

    @Override
    public String lockId() {
        return delegate.lockId();
    }

    @Override
    public String ownerId() {
        return delegate.ownerId();
    }

    @Override
    public Duration leaseTime() {
        return delegate.leaseTime();
    }

    @Override
    public Duration remainingValidity() {
        return delegate.remainingValidity();
    }

    @Override
    public boolean isHeld() {
        return delegate.isHeld();
    }

    @Override
    public Mono<LeaseLostException> lost() {
        return delegate.lost();
    }

    @Override
    public Mono<ReleaseOutcome> release() {
        return delegate.release();
    }

    @Override
    public Mono<ReleaseOutcome> releaseNoSoonerThan(Duration sinceGrant) {
        return delegate.releaseNoSoonerThan(sinceGrant);
    }

    @Override
    public Mono<Boolean> resetMaxHold(Duration fromNow) {
        return delegate.resetMaxHold(fromNow);
    }

    @Override
    public void reportRejectedWrite(StaleFencingTokenException rejection) {
        delegate.reportRejectedWrite(rejection);
    }

    @Override
    public String toString() {
        return delegate.toString();
    }
}
