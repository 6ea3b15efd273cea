package dev.fenced.torture;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.LossReason;
import dev.fenced.lock.ReleaseOutcome;
import dev.fenced.lock.StaleFencingTokenException;
import java.time.Duration;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * One grant of a lock to a worker, and what was observed of it: the token and owner, the local validity
 * deadline (sampled while held, since renewals move it), when the loss signal fired and why, and any
 * freeze of the holder. Fields written by several threads are volatile. Thread-safe.
 */
final class Grant {

    private final String resource;
    private final long token;
    private final String owner;
    private final @Nullable FencedLease lease;
    private final long plainDeadline;
    private final Supplier<ReleaseOutcome> releaser;

    private volatile long lastDeadline;
    private volatile long thawedAt;
    private volatile long lostAt;
    private volatile @Nullable LossReason lossReason;
    private volatile long releasedAt;
    private volatile @Nullable ReleaseOutcome releaseOutcome;
    private volatile long releaseReturnedAt;

    private Grant(String resource, long token, String owner, @Nullable FencedLease lease, long plainDeadline,
            Supplier<ReleaseOutcome> releaser) {
        this.resource = resource;
        this.token = token;
        this.owner = owner;
        this.lease = lease;
        this.plainDeadline = plainDeadline;
        this.releaser = releaser;
        this.lastDeadline = plainDeadline;
    }

    /** A grant of the library: its loss signal is recorded as it fires. */
    static Grant of(String resource, FencedLease lease) {
        return of(resource, lease, () -> lease.release().block(Ledger.STATEMENT_TIMEOUT));
    }

    /**
     * A grant of the library whose release goes through {@code releaser} (which releases {@code lease} in its own way,
     * e.g. after waiting for other releases to go with it); its loss signal is recorded as it fires.
     */
    static Grant of(String resource, FencedLease lease, Supplier<ReleaseOutcome> releaser) {
        Grant grant = new Grant(resource, lease.token(), lease.ownerId(), lease, 0, releaser);
        grant.sampleDeadline();
        if (grant.lastDeadline == 0) {
            // Emitted already past its deadline (the deadline counts from before the acquire was sent, and a
            // first acquire may wait for the connection): its loss is due at once.
            grant.lastDeadline = System.nanoTime();
        }
        lease.lost().subscribe(grant::lost, error -> { });
        return grant;
    }

    /** A grant of the plain TTL lock: valid until {@code deadline} by the local clock, no loss signal. */
    static Grant plain(String resource, long token, String owner, long deadline, Supplier<ReleaseOutcome> releaser) {
        return new Grant(resource, token, owner, null, deadline, releaser);
    }

    private void lost(LeaseLostException loss) {
        lostAt = System.nanoTime();
        lossReason = loss.reason();
    }

    String resource() {
        return resource;
    }

    long token() {
        return token;
    }

    String owner() {
        return owner;
    }

    @Nullable FencedLease lease() {
        return lease;
    }

    FencedLease requireLease() {
        if (lease == null) {
            throw new IllegalStateException("A plain TTL grant has no fenced lease");
        }
        return lease;
    }

    boolean isHeld() {
        return lease != null ? lease.isHeld() : System.nanoTime() - plainDeadline < 0;
    }

    /** Records the current local deadline, while the lease is held. */
    void sampleDeadline() {
        FencedLease l = lease;
        if (l != null && l.isHeld()) {
            long deadline = System.nanoTime() + l.remainingValidity().toNanos();
            if (deadline - lastDeadline > 0) {
                lastDeadline = deadline;
            }
        }
    }

    /** The holder was frozen until now: its loss timer could not run before. */
    void thawed() {
        thawedAt = System.nanoTime();
    }

    /** Whether {@link #release()} was called. */
    boolean isReleased() {
        return releasedAt != 0;
    }

    /**
     * Whether the lease had no timer of its own left at {@code nanos}: its loss signal had fired, or its release had
     * returned an outcome (a release that failed leaves a timer that signals the loss at the deadline). A freeze of its
     * client's renewal thread that begins later cannot delay its loss signal.
     */
    boolean settledBefore(long nanos) {
        long lost = lostAt;
        if (lost != 0 && lost - nanos < 0) {
            return true;
        }
        long returned = releaseReturnedAt;
        return releaseOutcome != null && returned != 0 && returned - nanos < 0;
    }

    /** When the loss signal fired ({@link System#nanoTime()}), or 0. */
    long lostAt() {
        return lostAt;
    }

    /** When the holder was last marked thawed, or 0. */
    long thawedAt() {
        return thawedAt;
    }

    /** The last local deadline sampled. */
    long lastDeadline() {
        return lastDeadline;
    }

    /** Whether {@link #release()} was called before {@code nanos}. */
    boolean releasedBefore(long nanos) {
        long released = releasedAt;
        return released != 0 && released - nanos < 0;
    }

    /** The lease as the holder believed it after checking it and before a pause: still held. */
    FencedLease believed() {
        return new BelievedLease(requireLease());
    }

    ReleaseOutcome release() {
        releasedAt = System.nanoTime();
        try {
            ReleaseOutcome outcome = releaser.get();
            releaseOutcome = outcome;
            return outcome;
        } finally {
            releaseReturnedAt = System.nanoTime();
        }
    }

    /** What the checker needs of this grant, once the worker is done with it. */
    LeaseRecord record() {
        FencedLease l = lease;
        if (l != null && lossReason == null) {
            // The loss signal is hot: by the end of a release it has fired or completed.
            try {
                LeaseLostException loss = l.lost().block(Duration.ofSeconds(1));
                if (loss != null && lossReason == null) {
                    lost(loss);
                }
            } catch (IllegalStateException stillPending) {
                // Neither released nor lost yet (a release failed): the checker sees no signal by release time.
            }
        }
        return new LeaseRecord(l != null, lastDeadline, thawedAt, lostAt, lossReason, releasedAt, releaseOutcome);
    }

    /** The observed life of a lease, for I5. Times are {@link System#nanoTime()}; zero means never. */
    record LeaseRecord(boolean fenced, long deadline, long thawedAt, long lostAt, @Nullable LossReason lossReason,
            long releasedAt, @Nullable ReleaseOutcome releaseOutcome) {

        /** The deadline the loss signal could have met: a frozen holder's timer runs only once thawed. */
        long effectiveDeadline() {
            return thawedAt != 0 && thawedAt - deadline > 0 ? thawedAt : deadline;
        }
    }

    /** A lease that says it is held: the holder checked, then paused, then wrote. */
    private static final class BelievedLease implements FencedLease {

        private final FencedLease lease;

        BelievedLease(FencedLease lease) {
            this.lease = lease;
        }

        @Override
        public String name() {
            return lease.name();
        }

        @Override
        public long token() {
            return lease.token();
        }

        @Override
        public String lockId() {
            return lease.lockId();
        }

        @Override
        public String ownerId() {
            return lease.ownerId();
        }

        @Override
        public Duration leaseTime() {
            return lease.leaseTime();
        }

        @Override
        public Duration remainingValidity() {
            return lease.leaseTime();
        }

        @Override
        public boolean isHeld() {
            return true;
        }

        @Override
        public Mono<LeaseLostException> lost() {
            return lease.lost();
        }

        @Override
        public Mono<ReleaseOutcome> release() {
            return lease.release();
        }

        @Override
        public void reportRejectedWrite(StaleFencingTokenException rejection) {
            lease.reportRejectedWrite(rejection);
        }
    }
}
