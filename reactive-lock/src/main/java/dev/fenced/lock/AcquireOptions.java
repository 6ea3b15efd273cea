package dev.fenced.lock;

import java.time.Duration;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * Per-call settings of an acquire: how long the lease lasts, how long to wait for a held lock and, optionally,
 * how long the lease may be held at most.
 * A setting left unset takes the client's default.
 *
 * <p>Immutable and thread-safe; every {@code with…} method returns a new instance.
 *
 * <pre>{@code
 * client.acquire("invoice:42", AcquireOptions.defaults().withLeaseTime(Duration.ofSeconds(5)));
 * client.acquire("invoice:42", AcquireOptions.tryOnce()); // empty when the lock is held
 * }</pre>
 */
public final class AcquireOptions {

    /** The longest lease time accepted (one day): longer leases are a design smell and overflow-prone. */
    public static final Duration MAX_LEASE_TIME = Duration.ofDays(1);

    /** The longest wait accepted (one day). */
    public static final Duration MAX_WAIT = Duration.ofDays(1);

    private static final AcquireOptions DEFAULTS = new AcquireOptions(null, null, null);
    private static final AcquireOptions TRY_ONCE = new AcquireOptions(null, Duration.ZERO, null);

    private final @Nullable Duration leaseTime;
    private final @Nullable Duration maxWait;
    private final @Nullable Duration maxHold;

    private AcquireOptions(@Nullable Duration leaseTime, @Nullable Duration maxWait, @Nullable Duration maxHold) {
        this.leaseTime = leaseTime;
        this.maxWait = maxWait;
        this.maxHold = maxHold;
    }

    /**
     * Options that take every setting from the client.
     *
     * @return the default options
     */
    public static AcquireOptions defaults() {
        return DEFAULTS;
    }

    /**
     * Options that make a single attempt: the acquire completes empty when the lock is held.
     *
     * @return options with a maximum wait of zero
     */
    public static AcquireOptions tryOnce() {
        return TRY_ONCE;
    }

    /**
     * Returns options with the given lease time: how long the lease stays valid without renewal. The
     * lease is renewed every third of it while held (or at the client's renewal ratio).
     *
     * @param leaseTime at least 10 ms and at most {@link #MAX_LEASE_TIME}
     * @return new options
     * @throws IllegalArgumentException if the lease time is out of range
     */
    public AcquireOptions withLeaseTime(Duration leaseTime) {
        return new AcquireOptions(Durations.requireLeaseTime(leaseTime, "leaseTime"), maxWait, maxHold);
    }

    /**
     * Returns options with the given maximum wait for a lock held by someone else. Zero makes a
     * single attempt (empty when held); otherwise the acquire fails with
     * {@link LockAcquireTimeoutException} when the wait runs out.
     *
     * @param maxWait zero or positive, at most {@link #MAX_WAIT}
     * @return new options
     * @throws IllegalArgumentException if the wait is negative or too long
     */
    public AcquireOptions withMaxWait(Duration maxWait) {
        return new AcquireOptions(leaseTime, Durations.requireWait(maxWait, "maxWait"), maxHold);
    }

    /**
     * Returns options with a hold cap: the lease granted by this acquire is never held longer than
     * {@code maxHold} after its grant. The acquire asks the lock service for no more than the cap, each
     * renewal asks only for what is left of it (so the lock's expiry in the service, {@code PX} on Redis,
     * {@code expires_at} on PostgreSQL, never lies beyond the cap by more than the renewal's way there), and
     * when the cap is reached the lease ends: it is released (owner-checked), {@link FencedLease#lost()} emits
     * a {@link LeaseLostException} with {@link LossReason#MAX_HOLD_REACHED}, and the work of
     * {@link FencedLockClient#withLease(String, AcquireOptions, java.util.function.Function) withLease} is
     * cancelled and fails with it. The cap is measured conservatively, from before the acquire was sent, on the
     * client's monotonic clock (a {@code VirtualTimeScheduler}'s time when one is injected); a cap shorter than
     * the lease time means the lease is never renewed. A held lease's cap can be moved with
     * {@link FencedLease#resetMaxHold(Duration)}. Unlike the client's
     * {@link FencedLockClientBuilder#maxHold(Duration)} (a leak guard that stops renewing and lets the lease
     * expire), this cap ends the lease on time and says so. Default: none.
     *
     * @param maxHold at least 10 ms and at most {@link #MAX_LEASE_TIME}
     * @return new options
     * @throws IllegalArgumentException if the cap is out of range
     */
    public AcquireOptions withMaxHold(Duration maxHold) {
        return new AcquireOptions(leaseTime, maxWait, Durations.requireLeaseTime(maxHold, "maxHold"));
    }

    /**
     * The hold cap, or {@code null} for none.
     *
     * @return the hold cap or {@code null}
     */
    public @Nullable Duration maxHold() {
        return maxHold;
    }

    /**
     * The lease time, or {@code null} to use the client's.
     *
     * @return the lease time or {@code null}
     */
    public @Nullable Duration leaseTime() {
        return leaseTime;
    }

    /**
     * The maximum wait, or {@code null} to use the client's.
     *
     * @return the maximum wait or {@code null}
     */
    public @Nullable Duration maxWait() {
        return maxWait;
    }

    @Override
    public boolean equals(@Nullable Object o) {
        return o instanceof AcquireOptions other
                && Objects.equals(leaseTime, other.leaseTime)
                && Objects.equals(maxWait, other.maxWait)
                && Objects.equals(maxHold, other.maxHold);
    }

    @Override
    public int hashCode() {
        return Objects.hash(leaseTime, maxWait, maxHold);
    }

    @Override
    public String toString() {
        return "AcquireOptions{leaseTime=" + (leaseTime == null ? "client default" : leaseTime)
                + ", maxWait=" + (maxWait == null ? "client default" : maxWait)
                + (maxHold == null ? "" : ", maxHold=" + maxHold) + "}";
    }
}
