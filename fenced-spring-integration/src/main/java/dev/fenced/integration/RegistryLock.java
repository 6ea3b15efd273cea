package dev.fenced.integration;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.LockAcquireTimeoutException;
import dev.fenced.lock.ReleaseOutcome;
import java.time.Duration;
import java.util.ConcurrentModificationException;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import org.jspecify.annotations.Nullable;
import org.springframework.dao.CannotAcquireLockException;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * One lock of a {@link FencedLockRegistry}. A local {@link ReentrantLock} gives per-thread ownership and
 * reentrancy, as Spring Integration's registries do; the first hold of the owning thread takes the Fenced lease
 * and the last unlock releases it, so the lease is only ever touched by the thread that holds the local lock.
 */
final class RegistryLock implements FencedDistributedLock {

    private final FencedLockClient client;
    private final String key;
    private final String name;
    private final @Nullable Duration defaultLeaseTime;
    private final ReentrantLock local = new ReentrantLock();
    /** Written and read by the thread that holds {@link #local}; volatile for {@link FencedLockRegistry} reads. */
    private volatile @Nullable FencedLease lease;
    private volatile long lastObtainedNanos;

    RegistryLock(FencedLockClient client, String key, String name, @Nullable Duration defaultLeaseTime) {
        this.client = client;
        this.key = key;
        this.name = name;
        this.defaultLeaseTime = defaultLeaseTime;
        this.lastObtainedNanos = System.nanoTime();
    }

    void obtained() {
        lastObtainedNanos = System.nanoTime();
    }

    long lastObtainedNanos() {
        return lastObtainedNanos;
    }

    boolean isLockedAnywhereInThisProcess() {
        return local.isLocked();
    }

    String name() {
        return name;
    }

    @Override
    public void lock() {
        lock(waitingOptions(defaultLeaseTime));
    }

    @Override
    public void lock(Duration ttl) {
        lock(waitingOptions(Objects.requireNonNull(ttl, "ttl must not be null")));
    }

    private void lock(AcquireOptions options) {
        refuseNonBlockingThread("lock()");
        local.lock();
        if (local.getHoldCount() > 1) {
            requireNestedHold();
            return;
        }
        try {
            // lock() is not interruptible: an interrupt is remembered and restored once the lease is held.
            while (true) {
                try {
                    lease = requireLease(awaitUninterruptibly(client.acquire(name, options).toFuture()));
                    return;
                } catch (LockAcquireTimeoutException e) {
                    // The longest wait one acquire accepts ran out (a day): wait on.
                }
            }
        } catch (RuntimeException e) {
            local.unlock();
            throw cannotAcquire(e);
        }
    }

    @Override
    public void lockInterruptibly() throws InterruptedException {
        AcquireOptions options = waitingOptions(defaultLeaseTime);
        refuseNonBlockingThread("lockInterruptibly()");
        local.lockInterruptibly();
        if (local.getHoldCount() > 1) {
            requireNestedHold();
            return;
        }
        try {
            while (true) {
                try {
                    lease = awaitInterruptibly(client.acquire(name, options));
                    return;
                } catch (LockAcquireTimeoutException e) {
                    // A day passed: wait on.
                }
            }
        } catch (InterruptedException e) {
            local.unlock();
            throw e;
        } catch (RuntimeException e) {
            local.unlock();
            throw cannotAcquire(e);
        }
    }

    @Override
    public boolean tryLock() {
        try {
            return tryLock(Duration.ZERO, defaultLeaseTime, "tryLock()");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
        // toNanos saturates, so a wait of Long.MAX_VALUE of any unit is the longest wait, not an overflow.
        return tryLock(Duration.ofNanos(unit.toNanos(time)), defaultLeaseTime, "tryLock(time, unit)");
    }

    @Override
    public boolean tryLock(Duration waitTime, Duration ttl) throws InterruptedException {
        return tryLock(waitTime, Objects.requireNonNull(ttl, "ttl must not be null"), "tryLock(waitTime, ttl)");
    }

    private boolean tryLock(Duration waitTime, @Nullable Duration ttl, String operation) throws InterruptedException {
        Objects.requireNonNull(waitTime, "waitTime must not be null");
        Duration wait = waitTime.isNegative() ? Duration.ZERO : waitTime;
        if (wait.compareTo(AcquireOptions.MAX_WAIT) > 0) {
            wait = AcquireOptions.MAX_WAIT;
        }
        AcquireOptions base = ttl == null ? AcquireOptions.defaults() : AcquireOptions.defaults().withLeaseTime(ttl);
        refuseNonBlockingThread(operation);
        long deadline = System.nanoTime() + wait.toNanos();
        if (!local.tryLock(wait.toNanos(), TimeUnit.NANOSECONDS)) {
            return false;
        }
        if (local.getHoldCount() > 1) {
            return confirmNestedHold();
        }
        try {
            long left = Math.max(0, deadline - System.nanoTime());
            FencedLease taken;
            try {
                taken = awaitInterruptibly(client.acquire(name, base.withMaxWait(Duration.ofNanos(left))));
            } catch (LockAcquireTimeoutException e) {
                taken = null;
            }
            if (taken == null) {
                local.unlock();
                return false;
            }
            lease = taken;
            return true;
        } catch (InterruptedException e) {
            local.unlock();
            throw e;
        } catch (RuntimeException e) {
            local.unlock();
            throw cannotAcquire(e);
        }
    }

    @Override
    public void unlock() {
        if (!local.isHeldByCurrentThread()) {
            throw new IllegalStateException("The current thread does not hold lock '" + key + "' of this registry");
        }
        if (local.getHoldCount() > 1) {
            local.unlock();
            return;
        }
        refuseNonBlockingThread("unlock()"); // before anything changes: the lock stays held
        FencedLease held = lease;
        try {
            if (held == null) {
                return;
            }
            // Not interruptible either: an unlock that gave up half-way would leave the lock to expire.
            ReleaseOutcome outcome = awaitUninterruptibly(held.release().toFuture());
            if (outcome == ReleaseOutcome.NOT_HELD) {
                LeaseLostException lost = held.lost().toFuture().getNow(null);
                throw new ConcurrentModificationException("Lock '" + key + "' (Fenced lock '" + name + "', token "
                        + held.token() + ") was lost before unlock"
                        + (lost == null ? "" : " (" + lost.reason() + ")")
                        + ": the work it guarded may have overlapped another holder's; fenced writes with its token "
                        + "were refused once another holder took the lock", lost);
            }
        } finally {
            lease = null;
            local.unlock();
        }
    }

    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("Conditions are not supported by FencedLockRegistry locks");
    }

    @Override
    public FencedLease lease() {
        FencedLease held = lease;
        if (!local.isHeldByCurrentThread() || held == null) {
            throw new IllegalStateException("The current thread does not hold lock '" + key + "' of this registry");
        }
        return held;
    }

    /**
     * A nested hold of the owning thread (the local lock is held more than once): as Spring Integration's
     * RedisLockRegistry checks the store on every hold, the lease must still be held, and the lock service must
     * confirm it with an owner-checked renewal. When it is not held, the nested hold is undone and {@code false}
     * returned; when the service cannot be reached, it is undone and {@link CannotAcquireLockException} thrown.
     */
    private boolean confirmNestedHold() {
        boolean held;
        try {
            held = renewInStore();
        } catch (RuntimeException e) {
            local.unlock();
            throw cannotAcquire(e);
        }
        if (!held) {
            local.unlock();
        }
        return held;
    }

    /** {@link #confirmNestedHold()} for lock() and lockInterruptibly(), which cannot answer false. */
    private void requireNestedHold() {
        if (!confirmNestedHold()) {
            FencedLease held = lease;
            throw new CannotAcquireLockException("Failed to lock '" + key + "' (Fenced lock '" + name
                    + "') again: the lease of the current thread's hold" + (held == null ? "" : " (token "
                    + held.token() + ")") + " was lost; unlock the outer hold");
        }
    }

    /**
     * Renews the owning thread's lease in the lock service now, owner-checked: {@code false} when the lease is
     * not held (lost, or found held by no one or another owner, which loses it). Moves the lease's hold cap to
     * {@link AcquireOptions#MAX_LEASE_TIME} from now, the longest Fenced allows. Waits uninterruptibly (restoring
     * the flag): one round trip.
     */
    boolean renewInStore() {
        FencedLease held = lease;
        if (held == null || !held.isHeld()) {
            return false;
        }
        return Boolean.TRUE.equals(awaitUninterruptibly(held.resetMaxHold(AcquireOptions.MAX_LEASE_TIME).toFuture()));
    }

    /** The lease when the current thread holds the lock, else {@code null}. */
    @Nullable FencedLease leaseIfOwned() {
        return local.isHeldByCurrentThread() ? lease : null;
    }

    private static AcquireOptions waitingOptions(@Nullable Duration ttl) {
        AcquireOptions options = AcquireOptions.defaults().withMaxWait(AcquireOptions.MAX_WAIT);
        return ttl == null ? options : options.withLeaseTime(ttl);
    }

    private void refuseNonBlockingThread(String operation) {
        if (Schedulers.isInNonBlockingThread()) {
            throw NonBlockingThreadException.of(operation, key, Thread.currentThread().getName());
        }
    }

    private RuntimeException cannotAcquire(RuntimeException e) {
        if (e instanceof CannotAcquireLockException || e instanceof IllegalArgumentException) {
            return e; // already classified, or a setting the client refuses (a lease time too short for it)
        }
        return new CannotAcquireLockException("Failed to lock '" + key + "' (Fenced lock '" + name + "')", e);
    }

    /**
     * Waits for the attempt; an interrupt cancels it (the client undoes what it took) and is thrown. An attempt
     * that was granted just as the interrupt arrived can no longer be cancelled: its lease is released (waited
     * for) before the interrupt is thrown, so that the interrupted call takes nothing, as documented.
     */
    private static @Nullable FencedLease awaitInterruptibly(Mono<FencedLease> acquire) throws InterruptedException {
        CompletableFuture<FencedLease> attempt = acquire.toFuture();
        try {
            return attempt.get();
        } catch (InterruptedException e) {
            cancelOrRelease(attempt);
            throw e;
        } catch (ExecutionException e) {
            throw unwrap(e);
        }
    }

    /**
     * Cancels an acquire attempt; when it cannot be cancelled because it completed with a lease, releases that
     * lease and waits for the release uninterruptibly, so that the lock is free when this returns.
     *
     * @return whether a granted lease had to be released
     */
    static boolean cancelOrRelease(CompletableFuture<FencedLease> attempt) {
        if (attempt.cancel(true) || attempt.isCompletedExceptionally()) {
            return false;
        }
        FencedLease late = attempt.getNow(null);
        if (late == null) {
            return false; // completed empty: nothing was taken
        }
        try {
            awaitUninterruptibly(late.release().toFuture());
        } catch (RuntimeException releaseFailed) {
            // No longer renewed: the lock service frees it at the end of its lease time.
        }
        return true;
    }

    /** Waits for the future, and if interrupted meanwhile goes on waiting and restores the flag afterwards. */
    private static <T> @Nullable T awaitUninterruptibly(CompletableFuture<T> future) {
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return future.get();
                } catch (InterruptedException e) {
                    interrupted = true;
                } catch (ExecutionException e) {
                    throw unwrap(e);
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private static FencedLease requireLease(@Nullable FencedLease taken) {
        if (taken == null) {
            // A waiting acquire never completes empty; if it did, the lock was not taken.
            throw new IllegalStateException("The acquire completed without a lease");
        }
        return taken;
    }

    private static RuntimeException unwrap(ExecutionException e) {
        Throwable cause = e.getCause();
        if (cause instanceof RuntimeException runtime) {
            return runtime;
        }
        if (cause instanceof Error error) {
            throw error;
        }
        return new IllegalStateException(cause);
    }

    @Override
    public String toString() {
        FencedLease held = lease;
        return "FencedDistributedLock{key=" + key + ", name=" + name
                + (held == null ? ", free in this process" : ", held, token=" + held.token()) + "}";
    }
}
