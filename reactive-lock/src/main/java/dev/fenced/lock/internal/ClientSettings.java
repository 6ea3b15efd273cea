package dev.fenced.lock.internal;

import dev.fenced.lock.LockObserver;
import dev.fenced.lock.TokenScheme;
import java.time.Duration;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * The validated, immutable settings of one client.
 *
 * @param keyPrefix prefix of every key and channel
 * @param leaseTime default lease time
 * @param renewalPeriod renewal period of a lease with the default lease time
 * @param maxWait default maximum wait of {@code acquire(name)}
 * @param commandTimeout timeout of one Redis command
 * @param scheduler renewal scheduler and monotonic clock
 * @param ownsScheduler whether the client disposes the scheduler on close
 * @param observer receives metrics and tracing events
 * @param tokenScheme how the store mints tokens
 */
public record ClientSettings(
        String keyPrefix,
        Duration leaseTime,
        Duration renewalPeriod,
        Duration maxWait,
        Duration commandTimeout,
        Scheduler scheduler,
        boolean ownsScheduler,
        LockObserver observer,
        TokenScheme tokenScheme) {

    private static final Duration MAX_DEFAULT_COMMAND_TIMEOUT = Duration.ofSeconds(5);

    /** Validates the combination and fills in the documented defaults. */
    public ClientSettings {
        Objects.requireNonNull(keyPrefix, "keyPrefix");
        Objects.requireNonNull(scheduler, "scheduler");
        Objects.requireNonNull(observer, "observer");
        Objects.requireNonNull(tokenScheme, "tokenScheme");
        if (renewalPeriod.compareTo(leaseTime) >= 0) {
            throw new IllegalStateException("renewalPeriod (" + renewalPeriod + ") must be shorter than leaseTime (" + leaseTime + ")");
        }
        if (commandTimeout.compareTo(leaseTime) >= 0) {
            throw new IllegalStateException("commandTimeout (" + commandTimeout + ") must be shorter than leaseTime (" + leaseTime + ")");
        }
    }

    /**
     * Settings with defaults for the values left {@code null}.
     *
     * @param keyPrefix the key prefix (already validated)
     * @param leaseTime the default lease time
     * @param renewalPeriod the renewal period, or {@code null} for a third of the lease time
     * @param maxWait the default maximum wait
     * @param commandTimeout the command timeout, or {@code null} for a third of the lease time capped at 5 s
     * @param scheduler the scheduler, or {@code null} for a new single daemon thread owned by the client
     * @return the settings
     */
    public static ClientSettings of(String keyPrefix, Duration leaseTime, @Nullable Duration renewalPeriod,
            Duration maxWait, @Nullable Duration commandTimeout, @Nullable Scheduler scheduler) {
        Duration third = leaseTime.dividedBy(3);
        Duration renewal = renewalPeriod != null ? renewalPeriod : third;
        Duration timeout = commandTimeout != null ? commandTimeout
                : (third.compareTo(MAX_DEFAULT_COMMAND_TIMEOUT) > 0 ? MAX_DEFAULT_COMMAND_TIMEOUT : third);
        boolean owns = scheduler == null;
        Scheduler s = scheduler != null ? scheduler : Schedulers.newSingle("fenced-renewal", true);
        try {
            return new ClientSettings(keyPrefix, leaseTime, renewal, maxWait, timeout, s, owns, LockObserver.NONE,
                    TokenScheme.SERVER_TIME);
        } catch (RuntimeException e) {
            if (owns) {
                s.dispose();
            }
            throw e;
        }
    }

    /**
     * The same settings with another observer.
     *
     * @param newObserver the observer
     * @return new settings
     */
    public ClientSettings withObserver(LockObserver newObserver) {
        return new ClientSettings(keyPrefix, leaseTime, renewalPeriod, maxWait, commandTimeout, scheduler, ownsScheduler,
                newObserver, tokenScheme);
    }

    /**
     * The same settings with another token scheme.
     *
     * @param scheme the scheme
     * @return new settings
     */
    public ClientSettings withTokenScheme(TokenScheme scheme) {
        return new ClientSettings(keyPrefix, leaseTime, renewalPeriod, maxWait, commandTimeout, scheduler, ownsScheduler,
                observer, scheme);
    }

    /**
     * The renewal period of a lease with the given lease time: the same fraction of it as the client's
     * renewal period is of the client's lease time.
     *
     * @param leaseNanos the lease time in nanoseconds
     * @return the renewal period in nanoseconds, at least one millisecond
     */
    long renewEveryNanos(long leaseNanos) {
        double ratio = (double) renewalPeriod.toNanos() / leaseTime.toNanos();
        return Math.max(1_000_000L, (long) (leaseNanos * ratio));
    }

    /**
     * The allowance for clock drift between this process and Redis subtracted from every deadline:
     * 1% of the lease time plus 2 ms.
     *
     * @param leaseNanos the lease time in nanoseconds
     * @return the allowance in nanoseconds
     */
    static long driftNanos(long leaseNanos) {
        return leaseNanos / 100 + 2_000_000L;
    }
}
