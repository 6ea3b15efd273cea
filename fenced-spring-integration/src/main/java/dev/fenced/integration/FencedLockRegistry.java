package dev.fenced.integration;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.FencedLockClientBuilder;
import dev.fenced.lock.internal.KeyLayout;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import org.springframework.integration.support.locks.ExpirableLockRegistry;
import org.springframework.integration.support.locks.RenewableLockRegistry;
import reactor.core.scheduler.Schedulers;

/**
 * A Spring Integration {@code LockRegistry} whose locks are Fenced leases, on Redis, Valkey or the PostgreSQL
 * lease store: the one bean to replace when moving from {@code RedisLockRegistry} or {@code JdbcLockRegistry}.
 *
 * <pre>{@code
 * @Bean
 * FencedLockRegistry lockRegistry(FencedLockClient locks) {
 *     return FencedLockRegistry.builder(locks).lockNamePrefix("orders:").build();
 * }
 *
 * FencedDistributedLock lock = registry.obtain("order-42");
 * if (lock.tryLock(5, TimeUnit.SECONDS)) {
 *     try {
 *         orders.settle(42, lock.lease().token());
 *     } finally {
 *         lock.unlock();
 *     }
 * }
 * }</pre>
 *
 * <p>The {@link java.util.concurrent.locks.Lock} semantics Spring Integration documents for its registries:
 * <ul>
 *   <li>{@link #obtain(Object)} returns the same lock for the same key while it is in use; keys are
 *       {@code String}s, and the lock's Fenced name is the {@linkplain Builder#lockNamePrefix(String) prefix} and
 *       the key (a key Fenced refuses fails {@code obtain} with {@link IllegalArgumentException}).</li>
 *   <li>Ownership is per thread, as with {@link java.util.concurrent.locks.ReentrantLock}: the locking thread
 *       owns the lock and may lock it again (each lock needs its unlock; as Spring Integration's RedisLockRegistry
 *       checks the store on every hold, a nested hold succeeds only while the lease is held and the lock service
 *       confirms it with an owner-checked renewal: otherwise a nested {@code tryLock} returns {@code false} and a
 *       nested {@code lock()} or {@code lockInterruptibly()} throws {@code CannotAcquireLockException}, and the
 *       nested hold is not taken); other threads of this process wait in the
 *       process, and other processes (or other registries on the same lock name) wait on the lock service. The
 *       lease is taken by the first hold and released by the last unlock.</li>
 *   <li>{@code lock()} waits without end and is not interruptible (an interrupt is restored once locked);
 *       {@code lockInterruptibly()} ends on an interrupt; {@code tryLock()} makes one attempt;
 *       {@code tryLock(time, unit)} waits at most that long (in the process and on the lock service together)
 *       and ends on an interrupt. An interrupted or timed-out wait leaves nothing held: an attempt already sent
 *       is undone by the client, and one granted just as the interrupt arrived is released before the
 *       {@code InterruptedException} is thrown (an interrupted call never reports the lock as taken). A lock service that cannot be reached fails the lock with
 *       {@code CannotAcquireLockException}, as Spring Integration's registries do; a ttl the client refuses (out of
 *       range, or too short for its command timeout) fails with the client's {@link IllegalArgumentException}.</li>
 *   <li>{@code unlock()} by a thread that does not hold the lock throws {@link IllegalStateException}. When the
 *       lease was lost while held (it expired, the service lost it, or it was superseded), {@code unlock()}
 *       frees the lock in this process and throws {@link java.util.ConcurrentModificationException}, as
 *       Spring Integration's registries do for a lock that expired in the store: treat it as critical, the
 *       guarded work may have overlapped another holder's. Fenced writes made with the lease's token were refused
 *       by storage from the moment another holder took the lock.</li>
 *   <li>{@code newCondition()} throws {@link UnsupportedOperationException}.</li>
 *   <li>Renewal: a held lease is renewed in the background by the client, every third of its lease time, for
 *       as long as it is held; a renewal task scheduler is not needed (one set with
 *       {@code setRenewalTaskScheduler} is not used). {@link #renewLock(Object)} checks that the current
 *       thread holds the lock and renews its lease in the lock service at once (owner-checked, as
 *       RedisLockRegistry's renew script is), and throws {@link IllegalStateException} when it is not held.</li>
 *   <li>A nested hold and {@code renewLock} move the lease's hold cap to one day from then
 *       ({@link AcquireOptions#MAX_LEASE_TIME}, through {@link FencedLease#resetMaxHold(Duration)}): a lease
 *       taken without a cap gets one, so a lock held for more than a day after its last nested hold or
 *       {@code renewLock} is lost then.</li>
 *   <li>The lease time: a ttl ({@code lock(ttl)}, {@code tryLock(waitTime, ttl)}, the registry's
 *       {@linkplain Builder#leaseTime(Duration) lease time}) must be longer than the client's command timeout
 *       (5 s on a default client, so a ttl of 5 s or less is refused with {@link IllegalArgumentException}) and
 *       long enough for its renewal period plus that timeout.</li>
 * </ul>
 *
 * <p>Blocking: this is a blocking API. Every lock, tryLock and unlock call blocks its thread while it waits for
 * the lock service (one round trip when the lock is free), and called on a Reactor non-blocking thread
 * ({@code Schedulers.isInNonBlockingThread()}) fails at once with {@link NonBlockingThreadException}. From
 * reactive code use the {@link FencedLockClient} itself.
 *
 * <p>The fencing token of a held lock is {@link FencedDistributedLock#lease()}{@code .token()}.
 *
 * <p>Thread-safe. The registry never closes the client.
 */
public final class FencedLockRegistry
        implements ExpirableLockRegistry<FencedDistributedLock>, RenewableLockRegistry<FencedDistributedLock> {

    private final FencedLockClient client;
    private final String lockNamePrefix;
    private final @Nullable Duration leaseTime;
    private final ConcurrentMap<String, RegistryLock> locks = new ConcurrentHashMap<>();

    private FencedLockRegistry(FencedLockClient client, String lockNamePrefix, @Nullable Duration leaseTime) {
        this.client = client;
        this.lockNamePrefix = lockNamePrefix;
        this.leaseTime = leaseTime;
    }

    /**
     * A registry with the defaults: no lock name prefix, the client's lease time.
     *
     * @param client the lock client; the registry never closes it
     * @return a new registry
     */
    public static FencedLockRegistry of(FencedLockClient client) {
        return builder(client).build();
    }

    /**
     * Starts a builder.
     *
     * @param client the lock client; the registry never closes it
     * @return a new builder
     */
    public static Builder builder(FencedLockClient client) {
        return new Builder(Objects.requireNonNull(client, "client must not be null"));
    }

    /**
     * The lock for {@code lockKey}: the same object for the same key until
     * {@link #expireUnusedOlderThan(long)} forgets it. Does not block and sends nothing.
     *
     * @param lockKey a {@code String}; with the prefix, a valid Fenced lock name (not blank, at most 1,024
     *     characters, no control characters or braces)
     * @return the lock
     * @throws IllegalArgumentException if the key is not a {@code String} or not a valid lock name
     */
    @Override
    public FencedDistributedLock obtain(Object lockKey) {
        String key = requireKey(lockKey);
        RegistryLock lock = locks.computeIfAbsent(key, k -> new RegistryLock(client, k, fencedName(k), leaseTime));
        lock.obtained();
        return lock;
    }

    /**
     * Forgets the locks that no thread of this process holds and that were last obtained more than {@code age}
     * milliseconds ago. A lock object obtained before and used after is still safe to use: the lock service
     * still excludes other holders.
     *
     * @param age milliseconds since the lock was last obtained
     */
    @Override
    public void expireUnusedOlderThan(long age) {
        long now = System.nanoTime();
        long ageNanos = TimeUnit.MILLISECONDS.toNanos(Math.max(0, age));
        locks.values().removeIf(lock -> !lock.isLockedAnywhereInThisProcess()
                && now - lock.lastObtainedNanos() > ageNanos);
    }

    /**
     * Checks that the current thread holds the lock for {@code lockKey} and renews its lease in the lock service
     * now, owner-checked, as RedisLockRegistry's renew script does: a lease that the service no longer holds for
     * this owner (it expired, the key was removed, another instance took the lock) is lost and this method
     * throws. The lease is also renewed in the background by the client, so calling this is never required. It
     * moves the lease's hold cap to one day from now ({@link AcquireOptions#MAX_LEASE_TIME}). Blocks the calling
     * thread for one round trip (not interruptibly: an interrupt is restored afterwards).
     *
     * @param lockKey the lock key
     * @throws IllegalStateException if the current thread does not hold the lock, or its lease was lost or is not
     *     held in the lock service
     * @throws NonBlockingThreadException on a Reactor non-blocking thread, before anything is sent
     * @throws dev.fenced.lock.LockServiceException if the lock service cannot be reached (the lease is then as
     *     it was)
     */
    @Override
    public void renewLock(Object lockKey) {
        String key = requireKey(lockKey);
        RegistryLock lock = locks.get(key);
        FencedLease lease = lock == null ? null : lock.leaseIfOwned();
        if (lease == null) {
            throw new IllegalStateException("Cannot renew lock '" + key + "': the current thread does not hold it");
        }
        if (Schedulers.isInNonBlockingThread()) {
            throw NonBlockingThreadException.of("renewLock(key)", key, Thread.currentThread().getName());
        }
        if (!lock.renewInStore()) {
            throw new IllegalStateException("Cannot renew lock '" + key + "': its lease (Fenced lock '" + lease.name()
                    + "', token " + lease.token() + ") was lost");
        }
    }

    /**
     * As {@link #renewLock(Object)}. A Fenced lease keeps the lease time it was taken with
     * ({@code lock(ttl)}, {@code tryLock(waitTime, ttl)}, or the registry's) and is renewed with it every third
     * of it; {@code ttl} is validated but does not change it.
     *
     * @param lockKey the lock key
     * @param ttl at least 10 ms, at most one day
     * @throws IllegalStateException if the current thread does not hold the lock, or its lease was lost
     * @throws IllegalArgumentException if {@code ttl} is out of range
     */
    @Override
    public void renewLock(Object lockKey, Duration ttl) {
        AcquireOptions.defaults().withLeaseTime(ttl);
        renewLock(lockKey);
    }

    private static String requireKey(Object lockKey) {
        if (!(lockKey instanceof String key)) {
            throw new IllegalArgumentException("lockKey must be a String, was "
                    + (lockKey == null ? "null" : lockKey.getClass().getName()));
        }
        return key;
    }

    private String fencedName(String key) {
        String name = lockNamePrefix + key;
        String problem = KeyLayout.problemWithName(name);
        if (!problem.isEmpty()) {
            throw new IllegalArgumentException("Lock key '" + key + "' cannot be used as Fenced lock name '" + name
                    + "': " + problem);
        }
        return name;
    }

    /** Builds a {@link FencedLockRegistry}; not thread-safe. */
    public static final class Builder {

        private final FencedLockClient client;
        private String lockNamePrefix = "";
        private @Nullable Duration leaseTime;

        private Builder(FencedLockClient client) {
            this.client = client;
        }

        /**
         * A prefix put before every lock key to make the Fenced lock name, as the registry key of
         * {@code RedisLockRegistry} does. Default: none.
         *
         * @param lockNamePrefix the prefix, possibly empty; at most 1,000 characters, no control characters or
         *     braces
         * @return this builder
         * @throws IllegalArgumentException if the prefix could not start a lock name
         */
        public Builder lockNamePrefix(String lockNamePrefix) {
            Objects.requireNonNull(lockNamePrefix, "lockNamePrefix must not be null");
            String problem = lockNamePrefix.length() > 1000 ? "it is longer than 1000 characters"
                    : KeyLayout.problemWithName(lockNamePrefix + "x");
            if (!problem.isEmpty()) {
                throw new IllegalArgumentException("lockNamePrefix '" + lockNamePrefix + "' is not valid: " + problem);
            }
            this.lockNamePrefix = lockNamePrefix;
            return this;
        }

        /**
         * The lease time of locks taken without a ttl ({@code lock()}, {@code tryLock(...)}): how long a lock
         * survives a process that stops renewing it (a crash, a pause). Default: the client's lease time
         * ({@link FencedLockClientBuilder#leaseTime(Duration)}).
         *
         * @param leaseTime at least 10 ms, at most one day
         * @return this builder
         * @throws IllegalArgumentException if out of range
         */
        public Builder leaseTime(Duration leaseTime) {
            AcquireOptions.defaults().withLeaseTime(leaseTime); // the client's validation and message
            this.leaseTime = leaseTime;
            return this;
        }

        /**
         * Builds the registry. Sends nothing.
         *
         * @return a new registry
         */
        public FencedLockRegistry build() {
            return new FencedLockRegistry(client, lockNamePrefix, leaseTime);
        }
    }
}
