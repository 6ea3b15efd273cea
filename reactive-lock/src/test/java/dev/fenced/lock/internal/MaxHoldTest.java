package dev.fenced.lock.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.LossReason;
import dev.fenced.lock.ReleaseOutcome;
import dev.fenced.lock.internal.memory.InMemoryLeaseStore;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/**
 * The hold cap ({@link AcquireOptions#withMaxHold}) in virtual time over the in-memory store: lease time 3 s,
 * renewal every 1 s, a drift allowance of 1% + 2 ms of what each request asked for.
 */
class MaxHoldTest {

    private static final String LOCK = "job:nightly";

    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();
    private final InMemoryLeaseStore memory = new InMemoryLeaseStore(clock);
    private final CountingLeaseStore store = new CountingLeaseStore(memory);
    private final LeasingLockClient client = LeasingLockClient.create(store,
            ClientSettings.of("test:", Duration.ofSeconds(3), null, Duration.ofSeconds(10), null, clock));

    @AfterEach
    void tearDown() {
        clock.dispose();
    }

    private FencedLease acquire(AcquireOptions options) {
        FencedLease lease = client.acquire(LOCK, options).block(Duration.ofSeconds(1));
        assertThat(lease).isNotNull();
        return lease;
    }

    private void elapse(long millis) {
        clock.advanceTimeBy(Duration.ofMillis(millis));
    }

    private static LeaseLostException lossOf(FencedLease lease) {
        CompletableFuture<LeaseLostException> lost = lease.lost().toFuture();
        assertThat(lost).as("lost() has signalled").isDone();
        return lost.join();
    }

    @Test
    void renewalsAskOnlyForWhatIsLeftOfTheCapAndTheLeaseEndsThere() {
        FencedLease lease = acquire(AcquireOptions.defaults().withMaxHold(Duration.ofSeconds(5)));

        elapse(3_000);
        assertThat(store.renewRequests).extracting(LeaseStore.RenewRequest::leaseMillis).containsExactly(3_000L, 3_000L, 2_000L);
        assertThat(memory.remainingTime(LOCK)).contains(Duration.ofSeconds(2));

        // The last renewal asked for 2 s: its deadline is 2 s less 22 ms after it was sent.
        elapse(1_977);
        assertThat(lease.isHeld()).isTrue();
        elapse(1);
        assertThat(lease.isHeld()).isFalse();
        assertThat(lossOf(lease).reason()).isEqualTo(LossReason.MAX_HOLD_REACHED);
        assertThat(lossOf(lease)).hasMessage("Lease on lock 'job:nightly' with fencing token 1 was lost: it reached its "
                + "maximum hold time and was released");
        assertThat(memory.holder(LOCK)).as("released at the cap").isEmpty();
        assertThat(client.heldLeases()).isZero();

        elapse(10_000);
        assertThat(store.renewRequests).as("nothing renews after the cap").hasSize(3);
    }

    @Test
    void aCapShorterThanTheLeaseTimeIsAllTheAcquireAsksForAndNothingRenews() {
        FencedLease lease = acquire(AcquireOptions.defaults().withMaxHold(Duration.ofMillis(500)));

        assertThat(store.acquireMillis).containsExactly(500L);
        assertThat(memory.remainingTime(LOCK)).contains(Duration.ofMillis(500));
        assertThat(lease.remainingValidity()).isEqualTo(Duration.ofMillis(493));

        elapse(493);
        assertThat(lossOf(lease).reason()).isEqualTo(LossReason.MAX_HOLD_REACHED);
        assertThat(memory.holder(LOCK)).isEmpty();
        assertThat(store.renewRequests).isEmpty();
    }

    @Test
    void withLeaseWorkIsCancelledWithTheCapsLoss() {
        boolean[] cancelled = {false};
        StepVerifier.create(client.withLease(LOCK, AcquireOptions.defaults().withMaxHold(Duration.ofSeconds(2)),
                        lease -> Mono.never().doOnCancel(() -> cancelled[0] = true)))
                .then(() -> elapse(2_000))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOfSatisfying(LeaseLostException.class,
                        lost -> assertThat(lost.reason()).isEqualTo(LossReason.MAX_HOLD_REACHED)));
        assertThat(cancelled[0]).isTrue();
        assertThat(memory.holder(LOCK)).isEmpty();
    }

    @Test
    void anotherClientTakesTheLockOnceTheCapIsReached() {
        LeasingLockClient other = LeasingLockClient.create(memory,
                ClientSettings.of("test:", Duration.ofSeconds(3), null, Duration.ofSeconds(10), null, clock));
        FencedLease first = acquire(AcquireOptions.defaults().withMaxHold(Duration.ofSeconds(4)));
        CompletableFuture<FencedLease> second = other.acquire(LOCK).toFuture();

        elapse(3_900);
        assertThat(second).isNotDone();
        elapse(200);
        assertThat(second).isDone();
        assertThat(second.join().token()).isGreaterThan(first.token());
        assertThat(lossOf(first).reason()).isEqualTo(LossReason.MAX_HOLD_REACHED);
    }

    @Test
    void resetMaxHoldMovesTheCapLaterFromNow() {
        FencedLease lease = acquire(AcquireOptions.defaults().withMaxHold(Duration.ofSeconds(2)));
        elapse(1_500);

        StepVerifier.create(lease.resetMaxHold(Duration.ofSeconds(5))).then(clock::advanceTime).expectNext(true).verifyComplete();
        assertThat(store.renewRequests).last().extracting(LeaseStore.RenewRequest::leaseMillis).isEqualTo(3_000L);

        elapse(4_000);
        assertThat(lease.isHeld()).as("held past the old cap").isTrue();
        elapse(1_000);
        assertThat(lossOf(lease).reason()).isEqualTo(LossReason.MAX_HOLD_REACHED);
        assertThat(memory.holder(LOCK)).isEmpty();
    }

    @Test
    void resetMaxHoldWaitsForARenewalInFlightAndThenRulesTheLease() {
        FencedLease lease = acquire(AcquireOptions.defaults().withMaxHold(Duration.ofMillis(3_500)));
        memory.setReplyDelay(Duration.ofMillis(300));
        elapse(1_100); // the renewal sent at 1 s asks for the last 2.5 s of the cap; answered at 1.3 s
        assertThat(store.renewRequests).extracting(LeaseStore.RenewRequest::leaseMillis).containsExactly(2_500L);

        CompletableFuture<Boolean> moved = lease.resetMaxHold(Duration.ofSeconds(5)).toFuture();
        assertThat(store.renewRequests).as("not before the renewal in flight has ended").hasSize(1);
        elapse(500);

        assertThat(moved).isCompletedWithValue(true);
        assertThat(store.renewRequests).extracting(LeaseStore.RenewRequest::leaseMillis).containsExactly(2_500L, 3_000L);
        elapse(3_000);
        assertThat(lease.isHeld()).as("the new cap (6.3 s) rules, not the old one (3.5 s)").isTrue();
    }

    @Test
    void resetMaxHoldCanMoveTheCapEarlierAndShortensTheLocksExpiry() {
        FencedLease lease = acquire(AcquireOptions.defaults().withMaxHold(Duration.ofSeconds(60)));
        elapse(500);

        StepVerifier.create(lease.resetMaxHold(Duration.ofMillis(800))).then(clock::advanceTime).expectNext(true).verifyComplete();
        assertThat(memory.remainingTime(LOCK)).contains(Duration.ofMillis(800));

        elapse(800);
        assertThat(lossOf(lease).reason()).isEqualTo(LossReason.MAX_HOLD_REACHED);
    }

    @Test
    void resetMaxHoldGivesALeaseWithoutACapOne() {
        FencedLease lease = acquire(AcquireOptions.defaults());

        StepVerifier.create(lease.resetMaxHold(Duration.ofSeconds(4))).then(clock::advanceTime).expectNext(true).verifyComplete();
        elapse(4_000);

        assertThat(lossOf(lease).reason()).isEqualTo(LossReason.MAX_HOLD_REACHED);
    }

    @Test
    void resetMaxHoldIsFalseOnceTheLeaseIsNoLongerHeld() {
        FencedLease released = acquire(AcquireOptions.defaults().withMaxHold(Duration.ofSeconds(5)));
        StepVerifier.create(released.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();
        StepVerifier.create(released.resetMaxHold(Duration.ofSeconds(5))).then(clock::advanceTime).expectNext(false).verifyComplete();

        FencedLease taken = acquire(AcquireOptions.defaults().withMaxHold(Duration.ofSeconds(5)));
        memory.deleteLock(LOCK);
        StepVerifier.create(taken.resetMaxHold(Duration.ofSeconds(5))).then(clock::advanceTime).expectNext(false).verifyComplete();
        clock.advanceTime();
        assertThat(lossOf(taken).reason()).isEqualTo(LossReason.NOT_HELD);
    }

    @Test
    void resetMaxHoldFailsWhenTheServiceCannotBeReachedAndKeepsTheOldCap() {
        FencedLease lease = acquire(AcquireOptions.defaults().withMaxHold(Duration.ofSeconds(2)));
        memory.setUnavailable(true);
        StepVerifier.create(lease.resetMaxHold(Duration.ofSeconds(30))).then(clock::advanceTime)
                .verifyError(dev.fenced.lock.LockServiceException.class);
        memory.setUnavailable(false);

        elapse(2_000);
        assertThat(lossOf(lease).reason()).isEqualTo(LossReason.MAX_HOLD_REACHED);
    }

    @Test
    void badCapsAreRejected() {
        assertThatThrownBy(() -> AcquireOptions.defaults().withMaxHold(Duration.ofMillis(5)))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("maxHold must be between 10 ms and 1 day, was PT0.005S");
        FencedLease lease = acquire(AcquireOptions.defaults());
        StepVerifier.create(lease.resetMaxHold(Duration.ofMillis(5)))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(IllegalArgumentException.class)
                        .hasMessage("fromNow must be between 10 ms and 1 day, was PT0.005S"));
        assertThat(AcquireOptions.defaults().withMaxHold(Duration.ofSeconds(1)))
                .isEqualTo(AcquireOptions.defaults().withMaxHold(Duration.ofSeconds(1)))
                .isNotEqualTo(AcquireOptions.defaults())
                .hasToString("AcquireOptions{leaseTime=client default, maxWait=client default, maxHold=PT1S}");
    }

    /** resetMaxHold in flight when the client closes ends: its reply is not dropped with the renewer's worker. */
    @Test
    void aResetMaxHoldInFlightWhenTheClientIsClosedEnds() {
        FencedLease lease = client.acquire(LOCK).block(Duration.ofSeconds(1));
        assertThat(lease).isNotNull();
        memory.setReplyDelay(Duration.ofMillis(500));

        CompletableFuture<Boolean> moved = lease.resetMaxHold(Duration.ofSeconds(20)).toFuture();
        elapse(100); // its renewal is sent, the reply comes at 0.5 s
        client.closeLater().block(Duration.ofSeconds(5));
        elapse(10_000);

        assertThat(moved).as("resetMaxHold ended after the close").isDone();
    }
}
