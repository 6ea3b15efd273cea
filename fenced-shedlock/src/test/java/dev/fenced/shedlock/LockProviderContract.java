package dev.fenced.shedlock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.LossReason;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import net.javacrumbs.shedlock.core.DefaultLockingTaskExecutor;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.LockingTaskExecutor;
import net.javacrumbs.shedlock.core.SimpleLock;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * ShedLock's {@code LockProvider} contract, as ShedLock's own provider tests check it (its test-support module
 * is not published), on {@link FencedLockProvider} over one real lock service: each subclass names the service.
 * Two providers on two clients stand for two instances of an application. Every test uses its own key prefix.
 */
abstract class LockProviderContract {

    static final Duration BOUND = Duration.ofSeconds(30);

    private final List<FencedLockClient> clients = new ArrayList<>();
    private String prefix;

    /** A new client on the suite's lock service, with {@code keyPrefix}; closed after the test. */
    abstract FencedLockClient newClient(String keyPrefix);

    /** Called after the test's clients were closed. */
    void afterClientsClosed() {
    }

    @BeforeEach
    void newPrefix() {
        prefix = "shedlock-" + UUID.randomUUID() + ":";
    }

    @AfterEach
    void closeAll() {
        Collections.reverse(clients);
        clients.forEach(FencedLockClient::close);
        afterClientsClosed();
    }

    FencedLockProvider instance() {
        FencedLockClient client = newClient(prefix);
        clients.add(client);
        return FencedLockProvider.of(client);
    }

    static LockConfiguration config(String name, Duration atMost, Duration atLeast) {
        return new LockConfiguration(Instant.now(), name, atMost, atLeast);
    }

    static FencedSimpleLock lock(FencedLockProvider provider, String name, Duration atMost, Duration atLeast) {
        Optional<SimpleLock> lock = provider.lock(config(name, atMost, atLeast));
        assertThat(lock).as("lock %s taken", name).isPresent();
        return (FencedSimpleLock) lock.get();
    }

    static boolean free(FencedLockProvider provider, String name) {
        Optional<SimpleLock> lock = provider.lock(config(name, Duration.ofSeconds(30), Duration.ZERO));
        lock.ifPresent(SimpleLock::unlock);
        return lock.isPresent();
    }

    /** Polls {@code condition} on the test thread until it holds, for at most the bound. */
    static void await(String what, BooleanSupplier condition) {
        long deadline = System.nanoTime() + BOUND.toNanos();
        while (!condition.getAsBoolean()) {
            assertThat(deadline - System.nanoTime()).as("still waiting for: " + what).isPositive();
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20));
        }
    }

    @Test
    void anInterruptedUnlockReleasesTheLockAndKeepsTheFlag() {
        FencedLockProvider mine = instance();
        FencedLockProvider theirs = instance();
        FencedSimpleLock plain = lock(mine, "interrupted-unlock", Duration.ofSeconds(30), Duration.ZERO);
        FencedSimpleLock tail = lock(mine, "interrupted-tail", Duration.ofMinutes(5), Duration.ofMinutes(2));
        // Interrupted before the release's round trip: a wait that honoured it would end with LockException.
        Thread.currentThread().interrupt();
        try {
            plain.unlock();
            tail.unlock();
            assertThat(Thread.currentThread().isInterrupted()).as("the interrupt flag is kept").isTrue();
        } finally {
            Thread.interrupted();
        }
        assertThat(free(theirs, "interrupted-unlock")).isTrue();
        assertThat(tail.lease().isHeld()).isFalse();
        assertThat(free(theirs, "interrupted-tail")).as("the tail was set").isFalse();
    }

    @Test
    void anInterruptAtTheEndOfAJobDoesNotReplaceItsResultInTheLockingTaskExecutor() throws Throwable {
        FencedLockProvider mine = instance();
        DefaultLockingTaskExecutor executor = new DefaultLockingTaskExecutor(mine);
        LockingTaskExecutor.TaskResult<String> result;
        try {
            result = executor.executeWithLock(() -> {
                Thread.currentThread().interrupt(); // e.g. the scheduler shutting down as the job ends
                return "done";
            }, config("interrupted-job", Duration.ofSeconds(30), Duration.ZERO));
            assertThat(Thread.currentThread().isInterrupted()).isTrue();
        } finally {
            Thread.interrupted();
        }
        assertThat(result.wasExecuted()).isTrue();
        assertThat(result.getResult()).isEqualTo("done");
        assertThat(free(instance(), "interrupted-job")).isTrue();
    }

    @Test
    void aHeldLockGivesEmptyToEveryInstanceUntilUnlocked() {
        FencedLockProvider mine = instance();
        FencedLockProvider theirs = instance();
        FencedSimpleLock held = lock(mine, "job", Duration.ofSeconds(30), Duration.ZERO);
        assertThat(theirs.lock(config("job", Duration.ofSeconds(30), Duration.ZERO))).isEmpty();
        assertThat(mine.lock(config("job", Duration.ofSeconds(30), Duration.ZERO))).isEmpty();
        assertThat(free(theirs, "another-job")).isTrue();
        held.unlock();
        FencedSimpleLock next = lock(theirs, "job", Duration.ofSeconds(30), Duration.ZERO);
        assertThat(next.lease().token()).isGreaterThan(held.lease().token());
        next.unlock();
    }

    @Test
    void unlockKeepsTheLockWhileLockAtLeastForRuns() {
        FencedLockProvider mine = instance();
        FencedLockProvider theirs = instance();
        FencedSimpleLock held = lock(mine, "at-least", Duration.ofMinutes(5), Duration.ofMinutes(2));
        held.unlock();
        assertThat(held.lease().isHeld()).isFalse();
        assertThat(free(theirs, "at-least")).isFalse();
        assertThat(free(mine, "at-least")).isFalse();
    }

    @Test
    void theLockIsFreeOnceLockAtLeastForHasPassed() {
        FencedLockProvider mine = instance();
        FencedLockProvider theirs = instance();
        lock(mine, "tail", Duration.ofSeconds(30), Duration.ofMillis(800)).unlock();
        // Nobody releases it: the lock service expires it at the end of the tail.
        await("the tail ends", () -> free(theirs, "tail"));
    }

    @Test
    void aLockWhoseLockAtMostForPassedCanBeTakenByAnotherInstance() {
        FencedLockProvider mine = instance();
        FencedLockProvider theirs = instance();
        FencedSimpleLock held = lock(mine, "at-most", Duration.ofMillis(800), Duration.ZERO);
        await("lockAtMostFor passes", () -> free(theirs, "at-most"));
        LeaseLostException loss = held.lease().lost().block(BOUND);
        assertThat(loss).isNotNull().extracting(LeaseLostException::reason).isEqualTo(LossReason.MAX_HOLD_REACHED);
        held.unlock(); // valid, and frees nothing of the next holder's
    }

    @Test
    void extendKeepsTheLockPastTheFirstLockAtMostFor() {
        FencedLockProvider mine = instance();
        FencedLockProvider theirs = instance();
        assertThat(free(mine, "warm-up")).isTrue(); // the first command of a client also opens its connections
        FencedSimpleLock held = lock(mine, "extended", Duration.ofSeconds(3), Duration.ZERO);
        SimpleLock extended = held.extend(Duration.ofSeconds(30), Duration.ZERO).orElseThrow();
        assertThatThrownBy(held::unlock).isInstanceOf(IllegalStateException.class);
        LockSupport.parkNanos(Duration.ofSeconds(4).toNanos()); // past the first lockAtMostFor
        assertThat(held.lease().isHeld()).isTrue();
        assertThat(free(theirs, "extended")).isFalse();
        extended.unlock();
        assertThat(free(theirs, "extended")).isTrue();
    }

    @Test
    void extendOfALostLockIsEmpty() {
        FencedLockProvider mine = instance();
        FencedSimpleLock held = lock(mine, "lost", Duration.ofMillis(300), Duration.ZERO);
        await("the lease reaches its cap", () -> !held.lease().isHeld());
        assertThat(held.extend(Duration.ofSeconds(30), Duration.ZERO)).isEmpty();
        assertThatThrownBy(held::unlock).isInstanceOf(IllegalStateException.class)
                .hasMessage("Lock lost is not valid, it has already been unlocked or extended");
    }

    @Test
    void theTokenOfTheRunIsReachableInsideTheLockingTaskExecutor() throws Throwable {
        FencedLockProvider mine = instance();
        LockingTaskExecutor.TaskResult<FencedLease> run = new DefaultLockingTaskExecutor(mine).executeWithLock(
                () -> FencedLockProvider.currentLease("report").orElseThrow(),
                config("report", Duration.ofSeconds(30), Duration.ZERO));
        assertThat(run.wasExecuted()).isTrue();
        FencedLease lease = run.getResult();
        assertThat(lease.name()).isEqualTo("report");
        assertThat(lease.lockId()).isEqualTo(prefix + "{report}");
        assertThat(lease.isHeld()).as("released after the task").isFalse();
        assertThat(FencedLockProvider.currentLease("report")).isEmpty();
    }

    /**
     * ShedLock's fuzz test: many threads on two instances run a task through {@code DefaultLockingTaskExecutor}
     * that adds one to a shared counter with a read, a pause and a write. Runs are skipped while the lock is held;
     * every run that executed must be counted, and no two may overlap.
     */
    @Test
    void manyThreadsOnTwoInstancesLoseNoUpdate() throws Exception {
        List<LockingTaskExecutor> executors = List.of(new DefaultLockingTaskExecutor(instance()),
                new DefaultLockingTaskExecutor(instance()));
        int threadsPerInstance = 4;
        int attemptsPerThread = 40;
        int[] counter = {0};
        AtomicInteger executed = new AtomicInteger();
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger overlaps = new AtomicInteger();
        ExecutorService threads = Executors.newFixedThreadPool(2 * threadsPerInstance);
        try {
            CountDownLatch start = new CountDownLatch(1);
            List<Future<?>> workers = new ArrayList<>();
            for (LockingTaskExecutor executor : executors) {
                for (int t = 0; t < threadsPerInstance; t++) {
                    workers.add(threads.submit(() -> {
                        start.await();
                        for (int i = 0; i < attemptsPerThread; i++) {
                            executor.executeWithLock((Runnable) () -> {
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
                                executed.incrementAndGet();
                                inside.decrementAndGet();
                            }, config("counter", Duration.ofSeconds(30), Duration.ZERO));
                        }
                        return null;
                    }));
                }
            }
            start.countDown();
            for (Future<?> worker : workers) {
                try {
                    worker.get(BOUND.toSeconds() * 4, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    throw new AssertionError("a worker failed", e.getCause());
                }
            }
        } finally {
            threads.shutdownNow();
        }
        assertThat(overlaps).hasValue(0);
        assertThat(executed.get()).isPositive();
        synchronized (counter) {
            assertThat(counter[0]).isEqualTo(executed.get());
        }
    }
}
