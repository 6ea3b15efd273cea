package dev.fenced.r2dbc;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.LossReason;
import dev.fenced.lock.ReleaseOutcome;
import dev.fenced.lock.StaleFencingTokenException;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import reactor.core.publisher.Mono;

/**
 * A lease with a chosen token and owner, for storage tests that need tokens no single lock could hand
 * out at once (concurrent writers, a token re-issued to another owner, a holder that paused after its
 * last check). Records what storage reports to it. Shared with the tests of {@code r2dbc-fencing-spring} through
 * this module's test jar.
 */
public final class TestLease implements FencedLease {

    private final String name;
    private final String lockId;
    private final long token;
    private final String owner;
    /** Whether the lease is held; {@link #release()} and a report of a newer holder clear it. */
    public final AtomicBoolean held = new AtomicBoolean(true);
    /** The newer token storage reported to the lease, or -1. */
    public final AtomicLong reportedNewerToken = new AtomicLong(-1);

    /** A lease of the default key prefix {@code fenced:}. */
    public TestLease(String name, long token, String owner) {
        this("fenced:", name, token, owner);
    }

    /** A lease of a client with the given key prefix. */
    public TestLease(String keyPrefix, String name, long token, String owner) {
        this.name = name;
        this.lockId = keyPrefix + "{" + name + "}";
        this.token = token;
        this.owner = owner;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public long token() {
        return token;
    }

    @Override
    public String lockId() {
        return lockId;
    }

    @Override
    public String ownerId() {
        return owner;
    }

    @Override
    public Duration leaseTime() {
        return Duration.ofSeconds(30);
    }

    @Override
    public Duration remainingValidity() {
        return held.get() ? Duration.ofSeconds(30) : Duration.ZERO;
    }

    @Override
    public boolean isHeld() {
        return held.get();
    }

    @Override
    public Mono<LeaseLostException> lost() {
        return held.get() ? Mono.never() : Mono.just(LeaseLostException.of(name, token, LossReason.EXPIRED));
    }

    @Override
    public Mono<ReleaseOutcome> release() {
        held.set(false);
        return Mono.just(ReleaseOutcome.RELEASED);
    }

    @Override
    public void reportRejectedWrite(StaleFencingTokenException rejection) {
        // As the real lease: only a newer holder ends it.
        if (rejection.storedToken() > token || (rejection.storedToken() == token && !owner.equals(rejection.storedOwner()))) {
            reportedNewerToken.set(rejection.storedToken());
            held.set(false);
        }
    }
}
