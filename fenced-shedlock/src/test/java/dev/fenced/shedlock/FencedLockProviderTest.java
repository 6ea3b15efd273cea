package dev.fenced.shedlock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.LossReason;
import dev.fenced.lock.test.FencedLockTestKit;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicReference;
import net.javacrumbs.shedlock.core.DefaultLockingTaskExecutor;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.LockExtender;
import net.javacrumbs.shedlock.core.LockingTaskExecutor.TaskResult;
import net.javacrumbs.shedlock.core.SimpleLock;
import net.javacrumbs.shedlock.support.LockException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/**
 * ShedLock's provider contract in virtual time, on the test kit's in-memory lock service: what ShedLock's own
 * provider tests check (held, unlock, lockAtLeastFor, lockAtMostFor, extend), exactly at the boundaries.
 */
class FencedLockProviderTest {

    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();
    private final FencedLockTestKit kit = FencedLockTestKit.create(clock);
    private final FencedLockProvider provider = FencedLockProvider.builder(kit.client()).clock(clock).build();

    @AfterEach
    void close() {
        kit.close();
        clock.dispose();
    }

    private static LockConfiguration config(String name, Duration atMost, Duration atLeast) {
        return new LockConfiguration(Instant.now(), name, atMost, atLeast);
    }

    private FencedSimpleLock lock(String name, Duration atMost, Duration atLeast) {
        Optional<SimpleLock> lock = provider.lock(config(name, atMost, atLeast));
        assertThat(lock).as("lock %s taken", name).isPresent();
        return (FencedSimpleLock) lock.get();
    }

    private boolean free(String name) {
        Optional<SimpleLock> lock = provider.lock(config(name, Duration.ofMinutes(1), Duration.ZERO));
        lock.ifPresent(SimpleLock::unlock);
        return lock.isPresent();
    }

    private void advance(Duration by) {
        clock.advanceTimeBy(by);
    }

    @Test
    void aHeldLockGivesEmptyUntilItIsUnlocked() {
        FencedSimpleLock held = lock("job", Duration.ofMinutes(10), Duration.ZERO);
        assertThat(provider.lock(config("job", Duration.ofMinutes(10), Duration.ZERO))).isEmpty();
        assertThat(provider.lock(config("other-job", Duration.ofMinutes(10), Duration.ZERO))).isPresent();
        held.unlock();
        assertThat(kit.holder("job")).isEmpty();
        FencedSimpleLock next = lock("job", Duration.ofMinutes(10), Duration.ZERO);
        assertThat(next.lease().token()).isGreaterThan(held.lease().token());
        next.unlock();
    }

    @Test
    void unlockKeepsTheLockUntilLockAtLeastForHasPassedSinceTheGrant() {
        FencedSimpleLock held = lock("at-least", Duration.ofHours(1), Duration.ofMinutes(10));
        advance(Duration.ofMinutes(3));
        held.unlock();
        assertThat(held.lease().isHeld()).isFalse();
        assertThat(kit.heldLeases()).isEmpty();
        assertThat(free("at-least")).isFalse();
        advance(Duration.ofMinutes(7).minusMillis(1));
        assertThat(free("at-least")).as("one millisecond before lockAtLeastFor").isFalse();
        advance(Duration.ofMillis(2));
        assertThat(free("at-least")).isTrue();
    }

    @Test
    void unlockAfterLockAtLeastForReleasesAtOnce() {
        FencedSimpleLock held = lock("short-tail", Duration.ofHours(1), Duration.ofMinutes(1));
        advance(Duration.ofMinutes(2));
        held.unlock();
        assertThat(kit.holder("short-tail")).isEmpty();
    }

    @Test
    void aLockWhoseLockAtMostForPassedCanBeTaken() {
        FencedSimpleLock held = lock("at-most", Duration.ofMinutes(5), Duration.ZERO);
        AtomicReference<LeaseLostException> loss = new AtomicReference<>();
        held.lease().lost().subscribe(loss::set);
        // The cap is measured conservatively (the last renewal's deadline less its drift allowance): the lease may
        // end a little before lockAtMostFor, never after it.
        advance(Duration.ofMinutes(5).minusSeconds(1));
        assertThat(free("at-most")).isFalse();
        advance(Duration.ofSeconds(1));
        assertThat(loss.get()).isNotNull().extracting(LeaseLostException::reason).isEqualTo(LossReason.MAX_HOLD_REACHED);
        assertThat(free("at-most")).isTrue();
    }

    @Test
    void extendMovesLockAtMostForFromNowAndSpendsTheOldLock() {
        FencedSimpleLock held = lock("extend", Duration.ofMinutes(5), Duration.ZERO);
        advance(Duration.ofMinutes(4));
        Optional<SimpleLock> extended = held.extend(Duration.ofMinutes(5), Duration.ZERO);
        assertThat(extended).isPresent();
        FencedSimpleLock next = (FencedSimpleLock) extended.get();
        assertThat(next.lease()).isSameAs(held.lease());
        assertThatThrownBy(held::unlock).isInstanceOf(IllegalStateException.class)
                .hasMessage("Lock extend is not valid, it has already been unlocked or extended");
        advance(Duration.ofMinutes(2));
        assertThat(free("extend")).as("past the first cap, within the moved one").isFalse();
        advance(Duration.ofMinutes(3).minusSeconds(1));
        assertThat(free("extend")).isFalse();
        advance(Duration.ofSeconds(1));
        assertThat(free("extend")).isTrue();
        next.unlock(); // still valid: its lease was lost at the cap, so it frees nothing
    }

    @Test
    void lockAtLeastForOfAnExtendedLockCountsFromTheExtend() {
        FencedSimpleLock held = lock("extend-tail", Duration.ofHours(1), Duration.ZERO);
        advance(Duration.ofMinutes(20));
        SimpleLock next = held.extend(Duration.ofHours(1), Duration.ofMinutes(10)).orElseThrow();
        next.unlock();
        advance(Duration.ofMinutes(10).minusMillis(1));
        assertThat(free("extend-tail")).isFalse();
        advance(Duration.ofMillis(2));
        assertThat(free("extend-tail")).isTrue();
    }

    @Test
    void extendOfALostLeaseIsEmptyAndSpendsTheLock() {
        FencedSimpleLock held = lock("lost", Duration.ofMinutes(5), Duration.ZERO);
        kit.loseLease("lost", LossReason.NOT_HELD);
        assertThat(held.extend(Duration.ofMinutes(5), Duration.ZERO)).isEmpty();
        assertThatThrownBy(held::unlock).isInstanceOf(IllegalStateException.class)
                .hasMessage("Lock lost is not valid, it has already been unlocked or extended");
        assertThatThrownBy(() -> held.extend(Duration.ofMinutes(5), Duration.ZERO))
                .isInstanceOf(IllegalStateException.class);
        assertThat(free("lost")).isTrue();
    }

    @Test
    void unlockIsAllowedOnce() {
        FencedSimpleLock held = lock("twice", Duration.ofMinutes(5), Duration.ZERO);
        held.unlock();
        assertThatThrownBy(held::unlock).isInstanceOf(IllegalStateException.class)
                .hasMessage("Lock twice is not valid, it has already been unlocked or extended");
    }

    @Test
    void theUnlockOfALostLeaseFreesNothingOfTheNextHolder() {
        FencedSimpleLock held = lock("taken-over", Duration.ofMinutes(5), Duration.ZERO);
        kit.loseLease("taken-over", LossReason.EXPIRED);
        FencedSimpleLock next = lock("taken-over", Duration.ofMinutes(5), Duration.ZERO);
        held.unlock();
        assertThat(kit.holder("taken-over")).contains(next.lease().ownerId() + ":" + next.lease().token());
        next.unlock();
    }

    @Test
    void theLeaseOfTheRunIsReachableInsideTheLockingTaskExecutor() throws Throwable {
        DefaultLockingTaskExecutor executor = new DefaultLockingTaskExecutor(provider);
        assertThat(FencedLockProvider.currentLease("report")).isEmpty();
        TaskResult<Long> token = executor.executeWithLock(() -> {
            FencedLease lease = FencedLockProvider.currentLease("report").orElseThrow();
            assertThat(kit.holder("report")).contains(lease.ownerId() + ":" + lease.token());
            assertThat(FencedLockProvider.currentLease("other")).isEmpty();
            return lease.token();
        }, config("report", Duration.ofMinutes(5), Duration.ZERO));
        assertThat(token.wasExecuted()).isTrue();
        assertThat(token.getResult()).isEqualTo(kit.issuedTokens("report").get(0));
        assertThat(FencedLockProvider.currentLease("report")).isEmpty();
    }

    @Test
    void lockExtenderExtendsTheRunningLockAndTheExecutorUnlocksTheExtendedOne() throws Throwable {
        DefaultLockingTaskExecutor executor = new DefaultLockingTaskExecutor(provider);
        TaskResult<FencedLease> run = executor.executeWithLock(() -> {
            advance(Duration.ofMinutes(4));
            LockExtender.extendActiveLock(Duration.ofMinutes(5), Duration.ZERO);
            advance(Duration.ofMinutes(3)); // past the first lockAtMostFor, within the moved one
            FencedLease lease = FencedLockProvider.currentLease("extended-run").orElseThrow();
            assertThat(lease.isHeld()).isTrue();
            return lease;
        }, config("extended-run", Duration.ofMinutes(5), Duration.ZERO));
        assertThat(run.getResult().isHeld()).isFalse();
        assertThat(kit.holder("extended-run")).as("the executor unlocked the extended lock").isEmpty();
    }

    @Test
    void theLockingTaskExecutorSkipsATaskWhoseLockIsHeld() throws Throwable {
        FencedSimpleLock held = lock("skipped", Duration.ofMinutes(5), Duration.ZERO);
        TaskResult<String> result = new DefaultLockingTaskExecutor(provider)
                .executeWithLock(() -> "ran", config("skipped", Duration.ofMinutes(5), Duration.ZERO));
        assertThat(result.wasExecuted()).isFalse();
        held.unlock();
    }

    @Test
    void theNamePrefixMapsShedLockNamesToFencedNames() {
        FencedLockProvider prefixed = FencedLockProvider.builder(kit.client()).lockNamePrefix("shedlock:").build();
        SimpleLock lock = prefixed.lock(config("nightly", Duration.ofMinutes(5), Duration.ZERO)).orElseThrow();
        assertThat(((FencedSimpleLock) lock).lease().name()).isEqualTo("shedlock:nightly");
        assertThat(kit.holder("shedlock:nightly")).isPresent();
        assertThat(FencedLockProvider.currentLease("nightly")).isPresent();
        lock.unlock();
    }

    @Test
    void namesAndDurationsFencedRefusesFailBeforeAnyIo() {
        assertThatThrownBy(() -> provider.lock(config("a{b}", Duration.ofMinutes(1), Duration.ZERO)))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("ShedLock lock name 'a{b}' cannot be used as Fenced lock name 'a{b}': "
                        + "Lock name must not contain braces, was 'a{b}'");
        assertThatThrownBy(() -> provider.lock(config(" ", Duration.ofMinutes(1), Duration.ZERO)))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("ShedLock lock name ' ' cannot be used as Fenced lock name ' ': Lock name must not be blank");
        assertThatThrownBy(() -> provider.lock(config("zero", Duration.ZERO, Duration.ZERO)))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("lockAtMostFor of ShedLock lock 'zero' must be between 10 ms and 1 day for Fenced, was PT0S");
        assertThatThrownBy(() -> provider.lock(config("long", Duration.ofDays(2), Duration.ZERO)))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("lockAtMostFor of ShedLock lock 'long' must be between 10 ms and 1 day for Fenced, was PT48H");
        assertThat(kit.issuedTokens("zero")).isEmpty();
    }

    @Test
    void extendToALockAtMostForFencedRefusesFailsAndKeepsTheLockValid() {
        FencedSimpleLock held = lock("bad-extend", Duration.ofMinutes(5), Duration.ZERO);
        assertThatThrownBy(() -> held.extend(Duration.ofMillis(1), Duration.ZERO))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("lockAtMostFor of ShedLock lock 'bad-extend' must be between 10 ms and 1 day for Fenced, "
                        + "was PT0.001S");
        held.unlock();
        assertThat(kit.holder("bad-extend")).isEmpty();
    }

    @Test
    void lockOnANonBlockingThreadFailsAtOnce() {
        Mono.fromCallable(() -> provider.lock(config("event-loop", Duration.ofMinutes(1), Duration.ZERO)))
                .subscribeOn(Schedulers.parallel())
                .as(StepVerifier::create)
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(IllegalStateException.class)
                        .hasMessageStartingWith("FencedLockProvider lock of lock 'event-loop' blocks and cannot run on "
                                + "the non-blocking thread parallel-")
                        .hasMessageEndingWith("; run ShedLock jobs on a scheduler thread or Schedulers.boundedElastic()"));
        assertThat(kit.issuedTokens("event-loop")).isEmpty();
    }

    @Test
    void anInterruptWhileLockingCancelsTheAttemptAndRestoresTheFlag() throws Exception {
        kit.hangNextAcquire();
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        AtomicReference<Boolean> flag = new AtomicReference<>();
        Thread locker = new Thread(() -> {
            try {
                provider.lock(config("hung", Duration.ofMinutes(5), Duration.ZERO));
            } catch (Throwable e) {
                thrown.set(e);
                flag.set(Thread.currentThread().isInterrupted());
            }
        });
        locker.start();
        while (locker.isAlive() && locker.getState() != Thread.State.WAITING) {
            Thread.onSpinWait();
        }
        locker.interrupt();
        locker.join(10_000);
        assertThat(thrown.get()).isInstanceOf(LockException.class).hasMessage("Interrupted during lock of lock 'hung'")
                .hasCauseInstanceOf(InterruptedException.class);
        assertThat(flag.get()).isTrue();
        assertThat(kit.heldLeases()).isEmpty();
        assertThat(free("hung")).as("the cancelled attempt left nothing held").isTrue();
    }

    @Test
    void anAttemptGrantedAsTheInterruptArrivesReleasesTheGrantedLease() {
        // The race of an interrupt and a grant, made exact: the attempt has completed with a lease when the waiting
        // thread, interrupted, tries to cancel it; cancelling fails, and the lease must not be dropped held.
        FencedLease granted = kit.client().acquire("granted-late", dev.fenced.lock.AcquireOptions.tryOnce()).block();
        assertThat(granted).isNotNull();
        Thread.currentThread().interrupt();
        try {
            assertThat(Blocking.cancelOrRelease(java.util.concurrent.CompletableFuture.completedFuture(granted)))
                    .isTrue();
            assertThat(Thread.currentThread().isInterrupted()).as("the interrupt flag is kept").isTrue();
        } finally {
            Thread.interrupted();
        }
        assertThat(granted.isHeld()).isFalse();
        assertThat(kit.heldLeases()).isEmpty();
        assertThat(free("granted-late")).isTrue();
    }

    @Test
    void anAttemptThatEndedWithoutALeaseReleasesNothing() {
        assertThat(Blocking.cancelOrRelease(java.util.concurrent.CompletableFuture.completedFuture(null))).isFalse();
        assertThat(Blocking.cancelOrRelease(new java.util.concurrent.CompletableFuture<>())).isFalse();
    }

    @Test
    void theBuilderValidatesEverySetting() {
        FencedLockProvider.Builder builder = FencedLockProvider.builder(kit.client());
        assertThatThrownBy(() -> builder.lockNamePrefix("a{")).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("lockNamePrefix 'a{' is not valid: Lock name must not contain braces, was 'a{x'");
        assertThatThrownBy(() -> builder.leaseTime(Duration.ofMillis(1))).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("leaseTime must be between 10 ms and 1 day, was PT0.001S");
        assertThatThrownBy(() -> FencedLockProvider.builder(null)).isInstanceOf(NullPointerException.class)
                .hasMessage("client must not be null");
    }
}
