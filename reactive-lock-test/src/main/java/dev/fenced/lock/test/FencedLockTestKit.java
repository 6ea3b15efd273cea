package dev.fenced.lock.test;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.LockServiceException;
import dev.fenced.lock.LossReason;
import dev.fenced.lock.FencedLockClientBuilder;
import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.lock.internal.memory.InMemoryLeaseStore;
import dev.fenced.lock.internal.LeasingLockClient;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import org.jspecify.annotations.Nullable;
import reactor.core.scheduler.Scheduler;

/**
 * An in-memory {@link FencedLockClient} for tests, with the semantics of the Redis client: tokens strictly
 * increase per lock name, leases are renewed every third of their lease time, waiters wake on release or
 * when the holder's lease runs out, a lost lease cancels {@code withLease} work with
 * {@link dev.fenced.lock.LeaseLostException}, a cancelled acquire leaves nothing held. Its clock is the
 * scheduler you give it: with a {@code VirtualTimeScheduler}, a test of "the lease is lost mid-work" runs
 * in milliseconds.
 *
 * <pre>{@code
 * VirtualTimeScheduler clock = VirtualTimeScheduler.create();
 * FencedLockTestKit locks = FencedLockTestKit.create(clock);
 * InvoiceService service = new InvoiceService(locks.client());
 * }</pre>
 *
 * <p>Beyond the client it can, like a misbehaving world: {@linkplain #loseLease lose a held lease},
 * {@linkplain #freeze freeze a holder} (its renewals stop, as in a long GC pause),
 * {@linkplain #failNextAcquire fail} or {@linkplain #hangNextAcquire hang} the next acquire; and it shows
 * {@linkplain #heldLeases() held leases} and {@linkplain #issuedTokens issued tokens}. The store behind it is
 * checked by the same contract test suite as the Redis store.
 *
 * <p>Thread-safe.
 */
public final class FencedLockTestKit implements AutoCloseable {

    private final InMemoryLeaseStore store;
    private final LeasingLockClient client;

    private FencedLockTestKit(Scheduler clock, Duration leaseTime, @Nullable Duration renewalPeriod, Duration maxWait) {
        ClientSettings settings = ClientSettings.of("test:", leaseTime, renewalPeriod, maxWait, null, clock);
        this.store = new InMemoryLeaseStore(clock, settings.commandTimeout());
        this.client = LeasingLockClient.create(store, settings);
    }

    /**
     * A kit with the client defaults: lease time 30 s, renewal every 10 s, maximum wait 30 s.
     *
     * @param clock the scheduler that is the clock and runs renewals and timers, typically a
     *     {@code VirtualTimeScheduler}
     * @return a new kit
     */
    public static FencedLockTestKit create(Scheduler clock) {
        return builder(clock).build();
    }

    /**
     * Starts a kit with other settings.
     *
     * @param clock the scheduler that is the clock
     * @return a builder
     */
    public static Builder builder(Scheduler clock) {
        return new Builder(clock);
    }

    /**
     * The in-memory lock client: pass it wherever your code takes a {@link FencedLockClient}.
     *
     * @return the client
     */
    public FencedLockClient client() {
        return client;
    }

    /**
     * Loses the lease the client holds on {@code name}, as if {@code reason} had happened: its
     * {@link FencedLease#lost()} signals (on the calling thread), {@code withLease} work is cancelled, and the
     * lock is free for the next acquire.
     *
     * @param name the lock name
     * @param reason the reason the lease reports
     * @throws IllegalStateException if the client holds no lease on {@code name}
     */
    public void loseLease(String name, LossReason reason) {
        Objects.requireNonNull(reason, "reason must not be null");
        if (!client.forceLoss(name, reason)) {
            throw new IllegalStateException("No lease is held on '" + name + "'");
        }
        store.deleteLock(name);
    }

    /**
     * Freezes the holder of {@code name}: its renewals stop, as in a GC pause longer than the lease. Nothing
     * else happens until the clock passes the lease's deadline, when the lease is lost
     * ({@link LossReason#EXPIRED}) and the lock becomes free.
     *
     * @param name the lock name
     * @throws IllegalStateException if the client holds no lease on {@code name}
     */
    public void freeze(String name) {
        if (!client.freeze(name)) {
            throw new IllegalStateException("No lease is held on '" + name + "'");
        }
    }

    /**
     * Makes the next acquire attempt (of any lock) fail with {@code error} without taking the lock.
     *
     * @param error the error the acquire emits
     */
    public void failNextAcquire(Throwable error) {
        store.failNextAcquire(Objects.requireNonNull(error, "error must not be null"));
    }

    /** Makes the next acquire attempt fail as an unreachable Redis would, with {@link LockServiceException}. */
    public void failNextAcquire() {
        failNextAcquire(LockServiceException.of("", "acquire", "Redis is unreachable (simulated by the test kit)", null));
    }

    /**
     * Makes the next acquire attempt never answer, as a silent Redis would: the attempt fails after the command
     * timeout (a third of the lease time, at most 5 s) with {@link LockServiceException}, or earlier if the
     * acquire's maximum wait is shorter ({@link dev.fenced.lock.LockAcquireTimeoutException}) or its subscriber
     * cancels.
     */
    public void hangNextAcquire() {
        store.hangNextAcquire();
    }

    /**
     * The leases the client holds now.
     *
     * @return the held leases
     */
    public List<FencedLease> heldLeases() {
        return client.heldLeaseList();
    }

    /**
     * Every token issued for {@code name}, in order.
     *
     * @param name the lock name
     * @return the tokens
     */
    public List<Long> issuedTokens(String name) {
        return store.issuedTokens(name);
    }

    /**
     * Who holds {@code name} now, as {@code owner:token}.
     *
     * @param name the lock name
     * @return the holder, or empty when the lock is free
     */
    public Optional<String> holder(String name) {
        return store.holder(name);
    }

    /** Closes the client: held leases are released and report {@link LossReason#CLIENT_CLOSED}. */
    @Override
    public void close() {
        client.closeLater().subscribe();
    }

    /** Builds a {@link FencedLockTestKit}; not thread-safe. */
    public static final class Builder {

        private final Scheduler clock;
        private Duration leaseTime = FencedLockClientBuilder.DEFAULT_LEASE_TIME;
        private @Nullable Duration renewalPeriod;
        private Duration maxWait = FencedLockClientBuilder.DEFAULT_MAX_WAIT;

        private Builder(Scheduler clock) {
            this.clock = Objects.requireNonNull(clock, "clock must not be null");
        }

        /**
         * The default lease time. Default 30 seconds.
         *
         * @param leaseTime the lease time
         * @return this builder
         */
        public Builder leaseTime(Duration leaseTime) {
            FencedLockClient.builder().leaseTime(leaseTime); // the same validation as the real client
            this.leaseTime = leaseTime;
            return this;
        }

        /**
         * The renewal period. Default: a third of the lease time.
         *
         * @param renewalPeriod the renewal period
         * @return this builder
         */
        public Builder renewalPeriod(Duration renewalPeriod) {
            FencedLockClient.builder().renewalPeriod(renewalPeriod);
            this.renewalPeriod = renewalPeriod;
            return this;
        }

        /**
         * The default maximum wait of {@code acquire(name)}. Default 30 seconds.
         *
         * @param maxWait the maximum wait
         * @return this builder
         */
        public Builder maxWait(Duration maxWait) {
            FencedLockClient.builder().maxWait(maxWait);
            this.maxWait = maxWait;
            return this;
        }

        /**
         * Builds the kit.
         *
         * @return the kit
         */
        public FencedLockTestKit build() {
            return new FencedLockTestKit(clock, leaseTime, renewalPeriod, maxWait);
        }
    }
}
