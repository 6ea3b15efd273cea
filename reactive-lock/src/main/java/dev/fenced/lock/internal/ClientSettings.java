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
 * @param commandTimeout timeout of one Redis command or PostgreSQL statement
 * @param scheduler renewal scheduler and monotonic clock
 * @param ownsScheduler whether the client disposes the scheduler on close
 * @param observer receives metrics and tracing events
 * @param tokenScheme how the store mints tokens
 * @param maxWaitersPerLock how many acquires may wait for one lock at once
 * @param maxHold how long a lease is renewed at most after its grant, or {@code null} for as long as it is held
 * @param emissionScheduler where leases and loss signals are delivered, or {@code null} for the default: leases
 *     on the thread that received the grant, losses on Reactor's parallel scheduler (or on a virtual-time
 *     scheduler, the client's)
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
        TokenScheme tokenScheme,
        int maxWaitersPerLock,
        @Nullable Duration maxHold,
        @Nullable Scheduler emissionScheduler) {

    /** The default key prefix. */
    public static final String DEFAULT_KEY_PREFIX = "fenced:";

    /** The default lease time. */
    public static final Duration DEFAULT_LEASE_TIME = Duration.ofSeconds(30);

    /** The default maximum wait of {@code acquire(name)}. */
    public static final Duration DEFAULT_MAX_WAIT = Duration.ofSeconds(30);

    private static final Duration MAX_DEFAULT_COMMAND_TIMEOUT = Duration.ofSeconds(5);

    /** Validates the combination and fills in the documented defaults. */
    public ClientSettings {
        Objects.requireNonNull(keyPrefix, "keyPrefix");
        Objects.requireNonNull(scheduler, "scheduler");
        Objects.requireNonNull(observer, "observer");
        Objects.requireNonNull(tokenScheme, "tokenScheme");
        if (maxWaitersPerLock < 1) {
            throw new IllegalArgumentException("maxWaitersPerLock must be at least 1, was " + maxWaitersPerLock);
        }
        if (renewalPeriod.compareTo(leaseTime) >= 0) {
            throw new IllegalStateException("renewalPeriod (" + renewalPeriod + ") must be shorter than leaseTime (" + leaseTime + ")");
        }
        if (commandTimeout.compareTo(leaseTime) >= 0) {
            throw new IllegalStateException("commandTimeout (" + commandTimeout + ") must be shorter than leaseTime (" + leaseTime + ")");
        }
        if (maxHold != null && maxHold.compareTo(leaseTime) <= 0) {
            throw new IllegalStateException("maxHold (" + maxHold + ") must be longer than leaseTime (" + leaseTime + ")");
        }
        String problem = renewalProblem(leaseTime.toNanos(), renewalPeriod.toNanos(), commandTimeout);
        if (!problem.isEmpty()) {
            throw new IllegalStateException(problem);
        }
    }

    /**
     * Describes why leases of {@code leaseNanos} renewed every {@code renewEveryNanos} would be lost: a renewal
     * sent at the end of its period may take the whole command timeout, and must still land before the
     * lease's local deadline (the lease time less the drift allowance). Otherwise every lease is lost at its
     * first renewal. The command timeout is all that a renewal waits before its failure is signalled and it is
     * retried: on PostgreSQL getting a pooled connection shares it, and a cancel of a statement that timed out
     * runs in the background.
     *
     * @param leaseNanos the lease time
     * @param renewEveryNanos the renewal period
     * @param commandTimeout the command timeout
     * @return the empty string if the combination is sound, else the message
     */
    static String renewalProblem(long leaseNanos, long renewEveryNanos, Duration commandTimeout) {
        long budget = leaseNanos - driftNanos(leaseNanos);
        if (renewEveryNanos + commandTimeout.toNanos() < budget) {
            return "";
        }
        return "renewalPeriod (" + Duration.ofNanos(renewEveryNanos) + ") + commandTimeout (" + commandTimeout
                + ") must be shorter than leaseTime (" + Duration.ofNanos(leaseNanos) + ") less the clock-drift allowance ("
                + Duration.ofNanos(driftNanos(leaseNanos)) + "): a renewal sent at the end of its period that takes the "
                + "whole command timeout must land before the lease runs out, or every lease is lost";
    }

    /**
     * Describes why a per-call lease time cannot be used with these settings.
     *
     * @param leaseTime the lease time of one acquire
     * @return the empty string if it can, else the message
     */
    public String problemWithLeaseTime(Duration leaseTime) {
        if (leaseTime.compareTo(commandTimeout) <= 0) {
            return "leaseTime (" + leaseTime + ") must be longer than the command timeout (" + commandTimeout
                    + "): a lease that can run out before a reply arrives cannot be renewed";
        }
        return renewalProblem(leaseTime.toNanos(), renewEveryNanos(leaseTime.toNanos()), commandTimeout);
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
                    TokenScheme.SERVER_TIME, Integer.MAX_VALUE, null, null);
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
                newObserver, tokenScheme, maxWaitersPerLock, maxHold, emissionScheduler);
    }

    /**
     * The same settings with another token scheme.
     *
     * @param scheme the scheme
     * @return new settings
     */
    public ClientSettings withTokenScheme(TokenScheme scheme) {
        return new ClientSettings(keyPrefix, leaseTime, renewalPeriod, maxWait, commandTimeout, scheduler, ownsScheduler,
                observer, scheme, maxWaitersPerLock, maxHold, emissionScheduler);
    }

    /**
     * The same settings with another bound on waiting acquires.
     *
     * @param max how many acquires may wait for one lock at once, at least 1
     * @return new settings
     */
    public ClientSettings withMaxWaitersPerLock(int max) {
        return new ClientSettings(keyPrefix, leaseTime, renewalPeriod, maxWait, commandTimeout, scheduler, ownsScheduler,
                observer, tokenScheme, max, maxHold, emissionScheduler);
    }

    /**
     * The same settings with a scheduler on which leases and loss signals are delivered.
     *
     * @param scheduler the scheduler, or {@code null} for the default
     * @return new settings
     */
    public ClientSettings withEmissionScheduler(@Nullable Scheduler scheduler) {
        return new ClientSettings(keyPrefix, leaseTime, renewalPeriod, maxWait, commandTimeout, this.scheduler, ownsScheduler,
                observer, tokenScheme, maxWaitersPerLock, maxHold, scheduler);
    }

    /**
     * The same settings with a bound on how long a lease is renewed.
     *
     * @param hold how long a lease is renewed at most after its grant, or {@code null} for no bound
     * @return new settings
     */
    public ClientSettings withMaxHold(@Nullable Duration hold) {
        return new ClientSettings(keyPrefix, leaseTime, renewalPeriod, maxWait, commandTimeout, scheduler, ownsScheduler,
                observer, tokenScheme, maxWaitersPerLock, hold, emissionScheduler);
    }

    /**
     * Where loss signals are delivered: the emission scheduler, else Reactor's parallel scheduler, so that the
     * user code they trigger (a cancelled {@code withLease}, its error handling) never runs on the thread that
     * renews. A virtual-time scheduler delivers them itself, so that tests stay deterministic.
     *
     * @return the scheduler
     */
    public Scheduler lossScheduler() {
        if (emissionScheduler != null) {
            return emissionScheduler;
        }
        return virtualTime() ? scheduler : Schedulers.parallel();
    }

    /**
     * Whether the scheduler is Reactor's {@code VirtualTimeScheduler}, whose virtual time is then the clock of
     * deadlines.
     *
     * @return whether time is virtual
     */
    public boolean virtualTime() {
        return scheduler.getClass().getName().equals("reactor.test.scheduler.VirtualTimeScheduler");
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
     * How long connecting may take: the command timeout, but at least 5 seconds, since a handshake on a
     * busy machine can take longer than a command. For every store.
     *
     * @param commandTimeout the command timeout
     * @return the connect timeout
     */
    public static Duration connectTimeout(Duration commandTimeout) {
        Duration floor = Duration.ofSeconds(5);
        return commandTimeout.compareTo(floor) > 0 ? commandTimeout : floor;
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
