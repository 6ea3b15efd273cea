package dev.fenced.integration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.LossReason;
import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.StaleFencingTokenException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.ConcurrentModificationException;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.test.StepVerifier;

/**
 * The {@code Lock} contract Spring Integration documents for its registries ({@code RedisLockRegistry},
 * {@code JdbcLockRegistry}), checked on {@link FencedLockRegistry} over one lock service. Each subclass names the
 * service; every test uses its own key prefix, so suites can share a server.
 */
abstract class LockRegistryContract {

    static final long BOUND_SECONDS = 30;

    private final List<FencedLockClient> clients = new ArrayList<>();
    private final ExecutorService threads = Executors.newCachedThreadPool();
    private String prefix;

    /** A new client on the suite's lock service, with {@code keyPrefix}; closed after the test. */
    abstract FencedLockClient newClient(String keyPrefix);

    /**
     * Frees the lock of {@code lease} in the lock service behind its holder's back, as an operator deleting the key
     * would; the holder's client still believes it holds the lease until it next talks to the service.
     */
    abstract void freeInStoreOnly(FencedLease lease);

    @BeforeEach
    void newPrefix() {
        prefix = "si-" + UUID.randomUUID() + ":";
    }

    /** Called after the test's clients were closed (JUnit would run a subclass's {@code @AfterEach} before). */
    void afterClientsClosed() {
    }

    @AfterEach
    void closeAll() {
        threads.shutdownNow();
        Collections.reverse(clients);
        clients.forEach(FencedLockClient::close);
        afterClientsClosed();
    }

    /** A registry on a client of its own: another instance of the application. */
    FencedLockRegistry instance() {
        FencedLockClient client = newClient(prefix);
        clients.add(client);
        return FencedLockRegistry.of(client);
    }

    <T> T onOtherThread(java.util.concurrent.Callable<T> call) throws Exception {
        return threads.submit(call).get(BOUND_SECONDS, TimeUnit.SECONDS);
    }

    /** Whether another thread can take {@code lock} (waiting up to the bound); it unlocks at once. */
    boolean freeFor(FencedDistributedLock lock) throws Exception {
        return this.<Boolean>onOtherThread(() -> {
            boolean taken = lock.tryLock(BOUND_SECONDS, TimeUnit.SECONDS);
            if (taken) {
                lock.unlock();
            }
            return taken;
        });
    }

    @Test
    void obtainReturnsTheSameLockForTheSameKey() {
        FencedLockRegistry registry = instance();
        assertThat(registry.obtain("a")).isSameAs(registry.obtain("a")).isNotSameAs(registry.obtain("b"));
    }

    @Test
    void aHeldLockCannotBeTakenByAnotherInstanceUntilUnlocked() throws Exception {
        FencedDistributedLock mine = instance().obtain("job");
        FencedDistributedLock theirs = instance().obtain("job");
        mine.lock();
        assertThat(this.<Boolean>onOtherThread(theirs::tryLock)).isFalse();
        assertThat(this.<Boolean>onOtherThread(() -> theirs.tryLock(200, TimeUnit.MILLISECONDS))).isFalse();
        mine.unlock();
        assertThat(freeFor(theirs)).isTrue();
    }

    @Test
    void anotherThreadOfTheSameProcessWaitsForTheOwner() throws Exception {
        FencedDistributedLock lock = instance().obtain("shared");
        lock.lock();
        try {
            assertThat(this.<Boolean>onOtherThread(lock::tryLock)).isFalse();
        } finally {
            lock.unlock();
        }
        assertThat(this.<Boolean>onOtherThread(() -> {
            lock.lock();
            lock.unlock();
            return true;
        })).isTrue();
    }

    @Test
    void theOwningThreadMayLockAgainAndNeedsAnUnlockForEachHold() throws Exception {
        FencedDistributedLock lock = instance().obtain("reentrant");
        FencedDistributedLock other = instance().obtain("reentrant");
        lock.lock();
        long token = lock.lease().token();
        assertThat(lock.tryLock()).isTrue();
        assertThat(lock.tryLock(1, TimeUnit.SECONDS)).isTrue();
        assertThat(lock.lease().token()).as("one lease serves every hold").isEqualTo(token);
        lock.unlock();
        lock.unlock();
        assertThat(this.<Boolean>onOtherThread(other::tryLock)).as("still held once").isFalse();
        lock.unlock();
        assertThat(freeFor(other)).isTrue();
    }

    @Test
    void aNestedHoldOfALostLeaseIsRefused() throws Exception {
        FencedDistributedLock lock = instance().obtain("nested-lost");
        lock.lock();
        FencedLease lease = lock.lease();
        lease.reportRejectedWrite(StaleFencingTokenException.of(lease.name(), "row", lease.token(),
                lease.token() + 1, "someone-else"));
        assertThat(lock.tryLock()).isFalse();
        assertThat(lock.tryLock(1, TimeUnit.SECONDS)).isFalse();
        assertThatThrownBy(lock::lock).isInstanceOf(org.springframework.dao.CannotAcquireLockException.class)
                .hasMessage("Failed to lock 'nested-lost' (Fenced lock 'nested-lost') again: the lease of the current "
                        + "thread's hold (token " + lease.token() + ") was lost; unlock the outer hold");
        assertThatThrownBy(lock::lockInterruptibly)
                .isInstanceOf(org.springframework.dao.CannotAcquireLockException.class);
        // The refused nested holds took nothing: one unlock ends the outer hold.
        assertThatThrownBy(lock::unlock).isInstanceOf(ConcurrentModificationException.class);
        assertThat(freeFor(lock)).isTrue();
    }

    @Test
    void aNestedHoldAndRenewLockAskTheLockServiceWhetherTheLeaseIsStillHeld() throws Exception {
        FencedLockRegistry registry = instance();
        FencedDistributedLock mine = registry.obtain("taken-in-store");
        FencedDistributedLock theirs = instance().obtain("taken-in-store");
        mine.lock();
        assertThat(mine.tryLock()).as("a nested hold of a lease the service holds").isTrue();
        mine.unlock();
        FencedLease lease = mine.lease();
        freeInStoreOnly(lease);
        ExecutorService theirThread = Executors.newSingleThreadExecutor(); // ownership is per thread
        try {
            assertThat(theirThread.submit(() -> theirs.tryLock(BOUND_SECONDS, TimeUnit.SECONDS))
                    .get(BOUND_SECONDS + 5, TimeUnit.SECONDS)).isTrue();
            nestedHoldIsRefusedWhileTheyHoldIt(registry, mine, lease);
            theirThread.submit(theirs::unlock).get(BOUND_SECONDS, TimeUnit.SECONDS);
        } finally {
            theirThread.shutdownNow();
        }
    }

    private void nestedHoldIsRefusedWhileTheyHoldIt(FencedLockRegistry registry, FencedDistributedLock mine,
            FencedLease lease) throws Exception {
        // The holder's client may not have noticed yet (its next renewal is up to a third of the lease away).
        assertThat(mine.tryLock(1, TimeUnit.SECONDS)).as("a nested tryLock while another instance holds it")
                .isFalse();
        assertThat(lease.isHeld()).isFalse();
        assertThatThrownBy(() -> registry.renewLock("taken-in-store")).isInstanceOf(IllegalStateException.class)
                .hasMessage("Cannot renew lock 'taken-in-store': its lease (Fenced lock 'taken-in-store', token "
                        + lease.token() + ") was lost");
        assertThatThrownBy(mine::unlock).isInstanceOf(ConcurrentModificationException.class);
        FencedDistributedLock third = instance().obtain("taken-in-store");
        assertThat(this.<Boolean>onOtherThread(third::tryLock)).as("the other instance still holds it").isFalse();
    }

    @Test
    void renewLockRenewsTheLeaseInTheLockService() throws Exception {
        FencedLockRegistry registry = instance();
        FencedDistributedLock mine = registry.obtain("renewed-in-store");
        mine.lock();
        FencedLease lease = mine.lease();
        registry.renewLock("renewed-in-store");
        assertThat(lease.isHeld()).isTrue();
        freeInStoreOnly(lease);
        assertThatThrownBy(() -> registry.renewLock("renewed-in-store")).isInstanceOf(IllegalStateException.class);
        assertThat(lease.isHeld()).as("the renewal found the lease not held").isFalse();
        assertThatThrownBy(mine::unlock).isInstanceOf(ConcurrentModificationException.class);
    }

    @Test
    void tryLockWithATimeoutGetsTheLockReleasedWithinIt() throws Exception {
        FencedDistributedLock mine = instance().obtain("handover");
        FencedDistributedLock theirs = instance().obtain("handover");
        mine.lock();
        long first = mine.lease().token();
        CountDownLatch waiting = new CountDownLatch(1);
        Future<Long> next = threads.submit(() -> {
            waiting.countDown();
            assertThat(theirs.tryLock(BOUND_SECONDS, TimeUnit.SECONDS)).isTrue();
            try {
                return theirs.lease().token();
            } finally {
                theirs.unlock();
            }
        });
        waiting.await();
        mine.unlock();
        assertThat(next.get(BOUND_SECONDS, TimeUnit.SECONDS)).isGreaterThan(first);
    }

    @Test
    void anInterruptEndsATimedWaitAndLeavesNothingHeld() throws Exception {
        FencedDistributedLock mine = instance().obtain("interrupted");
        FencedDistributedLock theirs = instance().obtain("interrupted");
        mine.lock();
        CompletableFuture<Thread> waiter = new CompletableFuture<>();
        Future<Throwable> outcome = threads.submit(() -> {
            waiter.complete(Thread.currentThread());
            try {
                theirs.tryLock(BOUND_SECONDS * 10, TimeUnit.SECONDS);
                return null;
            } catch (InterruptedException e) {
                return e;
            }
        });
        Thread waiting = waiter.get(BOUND_SECONDS, TimeUnit.SECONDS);
        awaitParked(waiting);
        waiting.interrupt();
        assertThat(outcome.get(BOUND_SECONDS, TimeUnit.SECONDS)).isInstanceOf(InterruptedException.class);
        mine.unlock();
        FencedDistributedLock third = instance().obtain("interrupted");
        assertThat(freeFor(third)).as("the interrupted wait took nothing").isTrue();
        assertThat(freeFor(theirs)).as("and holds nothing in its process").isTrue();
    }

    @Test
    void lockInterruptiblyEndsOnAnInterrupt() throws Exception {
        FencedDistributedLock mine = instance().obtain("interruptibly");
        FencedDistributedLock theirs = instance().obtain("interruptibly");
        mine.lock();
        CompletableFuture<Thread> waiter = new CompletableFuture<>();
        Future<Throwable> outcome = threads.submit(() -> {
            waiter.complete(Thread.currentThread());
            try {
                theirs.lockInterruptibly();
                return null;
            } catch (InterruptedException e) {
                return e;
            }
        });
        Thread waiting = waiter.get(BOUND_SECONDS, TimeUnit.SECONDS);
        awaitParked(waiting);
        waiting.interrupt();
        assertThat(outcome.get(BOUND_SECONDS, TimeUnit.SECONDS)).isInstanceOf(InterruptedException.class);
        mine.unlock();
    }

    @Test
    void lockIsNotInterruptibleAndRestoresTheInterrupt() throws Exception {
        FencedDistributedLock mine = instance().obtain("uninterruptible");
        FencedDistributedLock theirs = instance().obtain("uninterruptible");
        mine.lock();
        CompletableFuture<Thread> waiter = new CompletableFuture<>();
        Future<Boolean> interruptedAfterLock = threads.submit(() -> {
            waiter.complete(Thread.currentThread());
            theirs.lock();
            try {
                return Thread.currentThread().isInterrupted();
            } finally {
                Thread.interrupted();
                theirs.unlock();
            }
        });
        Thread waiting = waiter.get(BOUND_SECONDS, TimeUnit.SECONDS);
        awaitParked(waiting);
        waiting.interrupt();
        awaitParked(waiting); // still waiting for the lock after the interrupt
        assertThat(interruptedAfterLock).isNotDone();
        mine.unlock();
        assertThat(interruptedAfterLock.get(BOUND_SECONDS, TimeUnit.SECONDS)).isTrue();
    }

    @Test
    void unlockByAThreadThatDoesNotHoldTheLockThrows() throws Exception {
        FencedDistributedLock lock = instance().obtain("owned");
        lock.lock();
        try {
            Throwable thrown = onOtherThread(() -> {
                try {
                    lock.unlock();
                    return null;
                } catch (IllegalStateException e) {
                    return e;
                }
            });
            assertThat(thrown).isInstanceOf(IllegalStateException.class)
                    .hasMessage("The current thread does not hold lock 'owned' of this registry");
            assertThat(lock.lease().isHeld()).isTrue();
        } finally {
            lock.unlock();
        }
        assertThatThrownBy(lock::unlock).isInstanceOf(IllegalStateException.class)
                .hasMessage("The current thread does not hold lock 'owned' of this registry");
        assertThatThrownBy(lock::lease).isInstanceOf(IllegalStateException.class)
                .hasMessage("The current thread does not hold lock 'owned' of this registry");
    }

    @Test
    void unlockOfALostLeaseThrowsConcurrentModificationExceptionAndFreesTheLock() throws Exception {
        FencedDistributedLock lock = instance().obtain("lost");
        lock.lock();
        FencedLease lease = lock.lease();
        lease.reportRejectedWrite(StaleFencingTokenException.of(lease.name(), "counter", lease.token(),
                lease.token() + 1, "someone-else"));
        assertThat(lease.isHeld()).isFalse();
        assertThatThrownBy(lock::unlock).isInstanceOf(ConcurrentModificationException.class)
                .hasMessage("Lock 'lost' (Fenced lock 'lost', token " + lease.token() + ") was lost before unlock ("
                        + LossReason.SUPERSEDED + "): the work it guarded may have overlapped another holder's; fenced "
                        + "writes with its token were refused once another holder took the lock")
                .hasCauseInstanceOf(LeaseLostException.class);
        assertThat(freeFor(lock)).isTrue();
    }

    @Test
    void conditionsAreNotSupported() {
        assertThatThrownBy(() -> instance().obtain("cond").newCondition())
                .isInstanceOf(UnsupportedOperationException.class)
                .hasMessage("Conditions are not supported by FencedLockRegistry locks");
    }

    @Test
    void everyBlockingCallOnANonBlockingThreadFailsAtOnce() {
        FencedDistributedLock lock = instance().obtain("event-loop");
        List<Mono<Object>> calls = List.of(
                Mono.fromRunnable(lock::lock),
                Mono.fromRunnable(() -> lock.lock(Duration.ofSeconds(5))),
                Mono.fromCallable(() -> {
                    lock.lockInterruptibly();
                    return true;
                }),
                Mono.fromCallable(lock::tryLock),
                Mono.fromCallable(() -> lock.tryLock(1, TimeUnit.SECONDS)),
                Mono.fromCallable(() -> lock.tryLock(Duration.ofSeconds(1), Duration.ofSeconds(5))));
        List<String> operations = List.of("lock()", "lock()", "lockInterruptibly()", "tryLock()", "tryLock(time, unit)",
                "tryLock(waitTime, ttl)");
        for (int i = 0; i < calls.size(); i++) {
            String operation = operations.get(i);
            calls.get(i).subscribeOn(Schedulers.parallel()).as(StepVerifier::create)
                    .verifyErrorSatisfies(e -> assertThat(e).isInstanceOfSatisfying(NonBlockingThreadException.class,
                            refused -> {
                                assertThat(refused.operation()).isEqualTo(operation);
                                assertThat(refused.lockKey()).isEqualTo("event-loop");
                                assertThat(refused.threadName()).startsWith("parallel-");
                                assertThat(refused).hasMessage("FencedLockRegistry: " + operation
                                        + " of lock 'event-loop' blocks the calling thread and was called on the "
                                        + "non-blocking thread '" + refused.threadName() + "'; call it from a thread "
                                        + "that may block (a task executor, Schedulers.boundedElastic()), or use "
                                        + "FencedLockClient from reactive code");
                            }));
        }
        assertThat(lock.tryLock()).as("nothing was taken by the refused calls").isTrue();
        lock.unlock();
    }

    @Test
    void theLeaseTokenIsReachableAndIncreasesWithEveryGrant() throws Exception {
        FencedLockRegistry registry = instance();
        FencedDistributedLock lock = registry.obtain("tokens");
        lock.lock();
        FencedLease first = lock.lease();
        assertThat(first.name()).isEqualTo("tokens");
        assertThat(first.isHeld()).isTrue();
        lock.unlock();
        assertThat(first.isHeld()).isFalse();
        assertThat(lock.tryLock(BOUND_SECONDS, TimeUnit.SECONDS)).isTrue();
        try {
            assertThat(lock.lease().token()).isGreaterThan(first.token());
        } finally {
            lock.unlock();
        }
    }

    @Test
    void aLockWithATtlIsTakenWithThatLeaseTime() throws Exception {
        FencedDistributedLock lock = instance().obtain("ttl");
        lock.lock(Duration.ofSeconds(12));
        try {
            assertThat(lock.lease().leaseTime()).isEqualTo(Duration.ofSeconds(12));
        } finally {
            lock.unlock();
        }
        assertThat(lock.tryLock(Duration.ofSeconds(1), Duration.ofSeconds(15))).isTrue();
        try {
            assertThat(lock.lease().leaseTime()).isEqualTo(Duration.ofSeconds(15));
        } finally {
            lock.unlock();
        }
    }

    @Test
    void renewLockChecksThatTheCurrentThreadHoldsAValidLease() throws Exception {
        FencedLockRegistry registry = instance();
        FencedDistributedLock lock = registry.obtain("renew");
        assertThatThrownBy(() -> registry.renewLock("renew")).isInstanceOf(IllegalStateException.class)
                .hasMessage("Cannot renew lock 'renew': the current thread does not hold it");
        lock.lock();
        try {
            registry.renewLock("renew");
            registry.renewLock("renew", Duration.ofSeconds(10));
            Throwable fromOtherThread = onOtherThread(() -> {
                try {
                    registry.renewLock("renew");
                    return null;
                } catch (IllegalStateException e) {
                    return e;
                }
            });
            assertThat(fromOtherThread).hasMessage("Cannot renew lock 'renew': the current thread does not hold it");
            FencedLease lease = lock.lease();
            lease.reportRejectedWrite(StaleFencingTokenException.of(lease.name(), "row", lease.token(),
                    lease.token() + 1, null));
            assertThatThrownBy(() -> registry.renewLock("renew")).isInstanceOf(IllegalStateException.class)
                    .hasMessage("Cannot renew lock 'renew': its lease (Fenced lock 'renew', token " + lease.token()
                            + ") was lost");
        } finally {
            assertThatThrownBy(lock::unlock).isInstanceOf(ConcurrentModificationException.class);
        }
    }

    @Test
    void executeLockedRunsTheTaskUnderTheLock() throws Exception {
        FencedLockRegistry registry = instance();
        FencedDistributedLock other = instance().obtain("execute");
        String result = registry.executeLocked("execute", () -> {
            assertThat(this.<Boolean>onOtherThread(other::tryLock)).isFalse();
            return "ran";
        });
        assertThat(result).isEqualTo("ran");
        assertThat(freeFor(other)).isTrue();
    }

    @Test
    void expireUnusedOlderThanForgetsLocksThatNoThreadHolds() {
        FencedLockRegistry registry = instance();
        FencedDistributedLock idle = registry.obtain("idle");
        FencedDistributedLock busy = registry.obtain("busy");
        busy.lock();
        try {
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
            registry.expireUnusedOlderThan(0);
            assertThat(registry.obtain("idle")).isNotSameAs(idle);
            assertThat(registry.obtain("busy")).isSameAs(busy);
        } finally {
            busy.unlock();
        }
    }

    /**
     * Many threads on two instances add one to a shared counter under the lock, each with a read, a pause and a
     * write: a lost update would show as a total below the number of increments.
     */
    @Test
    void manyThreadsOnTwoInstancesLoseNoUpdate() throws Exception {
        List<FencedLockRegistry> instances = List.of(instance(), instance());
        int threadsPerInstance = 4;
        int incrementsPerThread = 15;
        int[] counter = {0};
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger overlaps = new AtomicInteger();
        List<Future<?>> workers = new ArrayList<>();
        CountDownLatch start = new CountDownLatch(1);
        for (FencedLockRegistry registry : instances) {
            for (int t = 0; t < threadsPerInstance; t++) {
                workers.add(threads.submit(() -> {
                    start.await();
                    for (int i = 0; i < incrementsPerThread; i++) {
                        FencedDistributedLock lock = registry.obtain("counter");
                        assertThat(lock.tryLock(BOUND_SECONDS, TimeUnit.SECONDS)).isTrue();
                        try {
                            if (inside.incrementAndGet() > 1) {
                                overlaps.incrementAndGet();
                            }
                            int read;
                            synchronized (counter) {
                                read = counter[0];
                            }
                            Thread.yield();
                            synchronized (counter) {
                                counter[0] = read + 1;
                            }
                            inside.decrementAndGet();
                        } finally {
                            lock.unlock();
                        }
                    }
                    return null;
                }));
            }
        }
        start.countDown();
        for (Future<?> worker : workers) {
            try {
                worker.get(BOUND_SECONDS * 4, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                throw new AssertionError("a worker failed", e.getCause());
            }
        }
        assertThat(overlaps).hasValue(0);
        synchronized (counter) {
            assertThat(counter[0]).isEqualTo(2 * threadsPerInstance * incrementsPerThread);
        }
    }

    /** Waits until {@code thread} is parked (waiting for the lock), for at most the bound. */
    static void awaitParked(Thread thread) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(BOUND_SECONDS);
        while (thread.getState() != Thread.State.WAITING && thread.getState() != Thread.State.TIMED_WAITING) {
            assertThat(System.nanoTime() - deadline).as("thread parks").isNegative();
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
        }
    }
}
