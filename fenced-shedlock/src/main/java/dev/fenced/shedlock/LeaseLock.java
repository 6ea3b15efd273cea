package dev.fenced.shedlock;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.ReleaseOutcome;
import java.time.Duration;
import java.util.Optional;
import net.javacrumbs.shedlock.core.AbstractSimpleLock;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * One ShedLock lock over a Fenced lease. ShedLock's base class keeps the validity rule (after unlock or extend
 * the object is spent); this class maps unlock and extend onto the lease.
 */
final class LeaseLock extends AbstractSimpleLock implements FencedSimpleLock {

    private static final Logger log = Loggers.getLogger(LeaseLock.class);

    private final FencedLockProvider provider;
    private final FencedLease lease;
    /** The provider's clock before the acquire was sent: no later than the grant. */
    private final long sentAt;
    /** Where this lock's lockAtLeastFor starts: the acquire, or the extend that made this lock. */
    private final long startedAt;

    LeaseLock(FencedLockProvider provider, LockConfiguration configuration, FencedLease lease, long sentAt,
            long startedAt) {
        super(configuration);
        this.provider = provider;
        this.lease = lease;
        this.sentAt = sentAt;
        this.startedAt = startedAt;
    }

    @Override
    public FencedLease lease() {
        return lease;
    }

    @Override
    protected void doUnlock() {
        String name = lockConfiguration.getName();
        Blocking.refuseNonBlockingThread("unlock", name);
        FencedLockProvider.forget(lease);
        // Waits uninterruptibly (restoring the flag): an interrupted unlock would leave the lock to expire, and in
        // ShedLock's DefaultLockingTaskExecutor its exception would replace the job's own result.
        Duration atLeast = lockConfiguration.getLockAtLeastFor();
        ReleaseOutcome outcome;
        if (atLeast.isZero() || atLeast.isNegative()) {
            outcome = Blocking.awaitUninterruptibly(lease.release(), "unlock", name);
        } else {
            // lockAtLeastFor counts from this lock's start; the lease's tail counts from its grant, which came
            // after sentAt: asking for (start - sentAt) + lockAtLeastFor can only keep the lock longer.
            Duration sinceGrant = Duration.ofNanos(startedAt - sentAt).plus(atLeast);
            if (sinceGrant.compareTo(AcquireOptions.MAX_LEASE_TIME) > 0) {
                // Extended for more than a day in all: what is left is at most lockAtLeastFor (at most a day), so
                // keep the lease renewed until then and let its cap release it.
                Duration left = Duration.ofNanos(startedAt - provider.now()).plus(atLeast);
                Boolean moved = Blocking.awaitUninterruptibly(
                        lease.resetMaxHold(left.compareTo(MIN_TAIL) < 0 ? MIN_TAIL : left), "unlock", name);
                outcome = Boolean.TRUE.equals(moved) ? ReleaseOutcome.LEFT_TO_EXPIRE : ReleaseOutcome.NOT_HELD;
            } else {
                outcome = Blocking.awaitUninterruptibly(lease.releaseNoSoonerThan(sinceGrant), "unlock", name);
            }
        }
        if (outcome == ReleaseOutcome.NOT_HELD) {
            log.warn("ShedLock lock '{}' (Fenced lock '{}', token {}) was lost before it was unlocked: the job ran on "
                    + "without holding it for a while", name, lease.name(), lease.token());
        }
    }

    @Override
    protected Optional<SimpleLock> doExtend(LockConfiguration next) {
        String name = next.getName();
        Duration cap = FencedLockProvider.requireHoldCap(next.getLockAtMostFor(), name);
        Blocking.refuseNonBlockingThread("extend", name);
        long extendedAt = provider.now();
        Boolean moved = Blocking.await(lease.resetMaxHold(cap), "extend", name);
        if (!Boolean.TRUE.equals(moved)) {
            FencedLockProvider.forget(lease);
            return Optional.empty();
        }
        return Optional.of(new LeaseLock(provider, next, lease, sentAt, extendedAt));
    }

    private static final Duration MIN_TAIL = Duration.ofMillis(10);

    @Override
    public String toString() {
        return "FencedSimpleLock{" + lockConfiguration + ", lease=" + lease.name() + ", token=" + lease.token() + "}";
    }
}
