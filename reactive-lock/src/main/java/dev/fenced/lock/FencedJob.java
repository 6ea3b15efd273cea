package dev.fenced.lock;

import dev.fenced.lock.internal.KeyLayout;
import java.time.Duration;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * A job that must run on one instance at a time: the lock it runs under and how long that lock is held. Run it
 * with {@link FencedLockClient#runJob(FencedJob, java.util.function.Supplier)}.
 *
 * <ul>
 *   <li><b>name</b>: the lock name (and the job's name in logs and metrics);</li>
 *   <li><b>lockAtMostFor</b>: the longest the lock may be held, counted from before the acquire was sent on the
 *       client's monotonic clock. The lease's hold cap ({@link AcquireOptions#withMaxHold(Duration)}): renewals
 *       never extend the lock past it, and when it is reached the job is cancelled, the lock released, and the
 *       outcome is {@link JobOutcome.Status#CUT_OFF}. A job that overruns never keeps running while another
 *       instance starts it;</li>
 *   <li><b>lockAtLeastFor</b>: after a job that ended sooner, the lock stays taken until this long after the grant
 *       ({@link FencedLease#releaseNoSoonerThan(Duration)}): the remainder is set as the lock's expiry in the lock
 *       service ({@code PX} on Redis, {@code expires_at} by the database clock on PostgreSQL), so the instances'
 *       clocks play no part and nothing renews the lock during that tail. Default zero: released when the job
 *       ends;</li>
 *   <li><b>maxWait</b>: how long a tick waits for the lock held elsewhere. Default zero: skip if held;</li>
 *   <li><b>leaseTime</b>: the lease time, renewed while the job runs. Default: the client's.</li>
 * </ul>
 *
 * <p>Immutable and thread-safe; every {@code with…} method returns a new instance and validates its argument.
 *
 * <pre>{@code
 * FencedJob nightly = FencedJob.of("report:nightly", Duration.ofMinutes(10)).withLockAtLeastFor(Duration.ofMinutes(1));
 * Mono<JobOutcome> tick = locks.runJob(nightly, () -> reports.build());
 * }</pre>
 */
public final class FencedJob {

    private final String name;
    private final Duration lockAtMostFor;
    private final Duration lockAtLeastFor;
    private final Duration maxWait;
    private final @Nullable Duration leaseTime;

    private FencedJob(String name, Duration lockAtMostFor, Duration lockAtLeastFor, Duration maxWait,
            @Nullable Duration leaseTime) {
        if (lockAtLeastFor.compareTo(lockAtMostFor) > 0) {
            throw new IllegalArgumentException("lockAtLeastFor (" + lockAtLeastFor + ") must not be longer than "
                    + "lockAtMostFor (" + lockAtMostFor + ") of job '" + name + "'");
        }
        this.name = name;
        this.lockAtMostFor = lockAtMostFor;
        this.lockAtLeastFor = lockAtLeastFor;
        this.maxWait = maxWait;
        this.leaseTime = leaseTime;
    }

    /**
     * A job on lock {@code name} held at most {@code lockAtMostFor}, released as soon as it ends, skipped when the
     * lock is held.
     *
     * @param name the lock name: not blank, at most 1024 characters, no control characters or braces
     * @param lockAtMostFor at least 10 ms and at most one day
     * @return the job
     * @throws IllegalArgumentException if the name or the duration is invalid
     */
    public static FencedJob of(String name, Duration lockAtMostFor) {
        String problem = KeyLayout.problemWithName(name);
        if (!problem.isEmpty()) {
            throw new IllegalArgumentException(problem);
        }
        return new FencedJob(name, Durations.requireLeaseTime(lockAtMostFor, "lockAtMostFor"), Duration.ZERO,
                Duration.ZERO, null);
    }

    /**
     * Returns the job with another lockAtMostFor.
     *
     * @param lockAtMostFor at least 10 ms and at most one day, and not shorter than lockAtLeastFor
     * @return a new job
     * @throws IllegalArgumentException if the duration is invalid
     */
    public FencedJob withLockAtMostFor(Duration lockAtMostFor) {
        return new FencedJob(name, Durations.requireLeaseTime(lockAtMostFor, "lockAtMostFor"), lockAtLeastFor, maxWait,
                leaseTime);
    }

    /**
     * Returns the job with a lockAtLeastFor: how long after the grant the lock stays taken after a job that ended
     * sooner (also one that failed).
     *
     * @param lockAtLeastFor zero or positive, not longer than lockAtMostFor
     * @return a new job
     * @throws IllegalArgumentException if the duration is negative or longer than lockAtMostFor
     */
    public FencedJob withLockAtLeastFor(Duration lockAtLeastFor) {
        return new FencedJob(name, lockAtMostFor, Durations.requireWait(lockAtLeastFor, "lockAtLeastFor"), maxWait,
                leaseTime);
    }

    /**
     * Returns the job with a maximum wait for a lock held elsewhere; zero (the default) skips the tick at once.
     * A tick of the same job still running in this client is skipped whatever the wait.
     *
     * @param maxWait zero or positive, at most one day
     * @return a new job
     * @throws IllegalArgumentException if the wait is negative or too long
     */
    public FencedJob withMaxWait(Duration maxWait) {
        return new FencedJob(name, lockAtMostFor, lockAtLeastFor, Durations.requireWait(maxWait, "maxWait"), leaseTime);
    }

    /**
     * Returns the job with its own lease time (renewed at the client's ratio while the job runs).
     *
     * @param leaseTime at least 10 ms and at most one day
     * @return a new job
     * @throws IllegalArgumentException if the lease time is out of range
     */
    public FencedJob withLeaseTime(Duration leaseTime) {
        return new FencedJob(name, lockAtMostFor, lockAtLeastFor, maxWait, Durations.requireLeaseTime(leaseTime, "leaseTime"));
    }

    /**
     * The lock name.
     *
     * @return the name
     */
    public String name() {
        return name;
    }

    /**
     * The longest the lock may be held.
     *
     * @return lockAtMostFor
     */
    public Duration lockAtMostFor() {
        return lockAtMostFor;
    }

    /**
     * How long after the grant the lock stays taken at least; zero for none.
     *
     * @return lockAtLeastFor
     */
    public Duration lockAtLeastFor() {
        return lockAtLeastFor;
    }

    /**
     * How long a tick waits for the lock; zero to skip if held.
     *
     * @return the maximum wait
     */
    public Duration maxWait() {
        return maxWait;
    }

    /**
     * The lease time, or {@code null} for the client's.
     *
     * @return the lease time or {@code null}
     */
    public @Nullable Duration leaseTime() {
        return leaseTime;
    }

    /**
     * The acquire options of one tick of this job.
     *
     * @return the options
     */
    public AcquireOptions acquireOptions() {
        AcquireOptions options = AcquireOptions.defaults().withMaxWait(maxWait).withMaxHold(lockAtMostFor);
        return leaseTime == null ? options : options.withLeaseTime(leaseTime);
    }

    @Override
    public boolean equals(@Nullable Object o) {
        return o instanceof FencedJob other && name.equals(other.name) && lockAtMostFor.equals(other.lockAtMostFor)
                && lockAtLeastFor.equals(other.lockAtLeastFor) && maxWait.equals(other.maxWait)
                && Objects.equals(leaseTime, other.leaseTime);
    }

    @Override
    public int hashCode() {
        return Objects.hash(name, lockAtMostFor, lockAtLeastFor, maxWait, leaseTime);
    }

    @Override
    public String toString() {
        return "FencedJob{name='" + name + "', lockAtMostFor=" + lockAtMostFor + ", lockAtLeastFor=" + lockAtLeastFor
                + ", maxWait=" + maxWait + ", leaseTime=" + (leaseTime == null ? "client default" : leaseTime) + "}";
    }
}
