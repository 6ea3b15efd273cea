package dev.fenced.lock.internal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.LossReason;
import dev.fenced.lock.ReleaseOutcome;
import dev.fenced.lock.internal.memory.InMemoryLeaseStore;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/**
 * {@link FencedLease#releaseNoSoonerThan} in virtual time over the in-memory store: lease time 3 s, renewal every
 * 1 s.
 */
class ReleaseNoSoonerThanTest {

    private static final String LOCK = "job:report";

    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();
    private final InMemoryLeaseStore memory = new InMemoryLeaseStore(clock);
    private final CountingLeaseStore store = new CountingLeaseStore(memory);
    private final LeasingLockClient client = client(store);

    private LeasingLockClient client(LeaseStore leases) {
        return LeasingLockClient.create(leases,
                ClientSettings.of("test:", Duration.ofSeconds(3), null, Duration.ofSeconds(30), null, clock));
    }

    @AfterEach
    void tearDown() {
        clock.dispose();
    }

    private FencedLease acquire() {
        FencedLease lease = client.acquire(LOCK).block(Duration.ofSeconds(1));
        assertThat(lease).isNotNull();
        return lease;
    }

    private void elapse(long millis) {
        clock.advanceTimeBy(Duration.ofMillis(millis));
    }

    private void tail(FencedLease lease, Duration sinceGrant, ReleaseOutcome expected) {
        StepVerifier.create(lease.releaseNoSoonerThan(sinceGrant)).expectNext(expected).verifyComplete();
    }

    @Test
    void theRestOfTheTimeBecomesTheLocksExpiryAndNothingRenewsIt() {
        FencedLease lease = acquire();
        elapse(1_500);

        tail(lease, Duration.ofSeconds(10), ReleaseOutcome.LEFT_TO_EXPIRE);

        assertThat(memory.remainingTime(LOCK)).contains(Duration.ofMillis(8_500));
        assertThat(store.renewRequests).last().extracting(LeaseStore.RenewRequest::leaseMillis).isEqualTo(8_500L);
        assertThat(lease.isHeld()).isFalse();
        assertThat(lease.lost().toFuture()).as("lost() completes empty").isCompletedWithValue(null);
        assertThat(client.heldLeases()).isZero();
        int renewals = store.renewRequests.size();

        elapse(8_499);
        assertThat(memory.holder(LOCK)).as("still taken during the tail").contains(lease.ownerId() + ":1");
        StepVerifier.create(client(memory).tryAcquire(LOCK)).verifyComplete();
        elapse(1);
        assertThat(memory.holder(LOCK)).isEmpty();
        assertThat(store.renewRequests).as("nothing renewed during the tail").hasSize(renewals);
        StepVerifier.create(client(memory).tryAcquire(LOCK).map(FencedLease::token)).expectNext(2L).verifyComplete();
    }

    @Test
    void theTailWaitsForARenewalInFlightSoThatNoneLandsAfterIt() {
        FencedLease lease = acquire();
        memory.setReplyDelay(Duration.ofMillis(500));
        elapse(1_100); // the renewal sent at 1 s is answered at 1.5 s
        assertThat(store.renewRequests).hasSize(1);

        CompletableFuture<ReleaseOutcome> outcome = lease.releaseNoSoonerThan(Duration.ofSeconds(10)).toFuture();
        assertThat(store.renewRequests).as("not before the renewal in flight has ended").hasSize(1);

        elapse(400);
        assertThat(store.renewRequests).hasSize(2);
        assertThat(store.renewRequests.get(1).leaseMillis()).as("the rest, counted when it is sent").isEqualTo(8_500L);
        elapse(500);
        assertThat(outcome).isCompletedWithValue(ReleaseOutcome.LEFT_TO_EXPIRE);
        assertThat(memory.remainingTime(LOCK)).contains(Duration.ofSeconds(8));
    }

    @Test
    void aTailShorterThanTheCurrentExpiryShortensIt() {
        FencedLease lease = acquire();
        elapse(100);

        tail(lease, Duration.ofMillis(600), ReleaseOutcome.LEFT_TO_EXPIRE);

        assertThat(memory.remainingTime(LOCK)).contains(Duration.ofMillis(500));
        elapse(500);
        assertThat(memory.holder(LOCK)).isEmpty();
    }

    @Test
    void whenTheTimeHasPassedTheLockIsReleasedAtOnce() {
        FencedLease lease = acquire();
        elapse(2_000);

        tail(lease, Duration.ofSeconds(2), ReleaseOutcome.RELEASED);

        assertThat(memory.holder(LOCK)).isEmpty();
    }

    @Test
    void aLaterReleaseReportsTheTailAndDoesNotFreeTheLockEarly() {
        FencedLease lease = acquire();
        tail(lease, Duration.ofSeconds(5), ReleaseOutcome.LEFT_TO_EXPIRE);

        StepVerifier.create(lease.release()).expectNext(ReleaseOutcome.LEFT_TO_EXPIRE).verifyComplete();
        tail(lease, Duration.ZERO, ReleaseOutcome.LEFT_TO_EXPIRE);
        assertThat(memory.holder(LOCK)).isPresent();
    }

    @Test
    void closingTheClientLeavesTheTailInPlace() {
        FencedLease lease = acquire();
        tail(lease, Duration.ofSeconds(5), ReleaseOutcome.LEFT_TO_EXPIRE);

        client.closeLater().block(Duration.ofSeconds(5));

        assertThat(memory.holder(LOCK)).contains(lease.ownerId() + ":1");
        assertThat(memory.remainingTime(LOCK)).contains(Duration.ofSeconds(5));
    }

    @Test
    void aWaiterOfTheSameClientTakesTheLockWhenTheTailExpires() {
        FencedLease lease = acquire();
        CompletableFuture<FencedLease> waiter = client.acquire(LOCK).toFuture();
        elapse(10);

        tail(lease, Duration.ofSeconds(4), ReleaseOutcome.LEFT_TO_EXPIRE);
        elapse(3_980);
        assertThat(waiter).as("not before the tail ends").isNotDone();

        elapse(2_000);
        assertThat(waiter).isDone();
        assertThat(waiter.join().token()).isEqualTo(2);
    }

    @Test
    void aLostLeaseReportsNotHeldAndLeavesNothingBehind() {
        FencedLease lease = acquire();
        memory.deleteLock(LOCK);

        tail(lease, Duration.ofSeconds(5), ReleaseOutcome.NOT_HELD);
        clock.advanceTime();

        assertThat(lease.lost().toFuture().join().reason()).isEqualTo(LossReason.NOT_HELD);
        assertThat(memory.holder(LOCK)).isEmpty();
    }

    @Test
    void aNestedViewLeavesTheTailToItsScope() {
        StepVerifier.create(client.withLease(LOCK, outer -> client.acquire(LOCK)
                        .flatMap(inner -> inner.releaseNoSoonerThan(Duration.ofSeconds(5)))))
                .expectNext(ReleaseOutcome.RETAINED)
                .verifyComplete();
        assertThat(memory.holder(LOCK)).as("the scope released it").isEmpty();
    }

    @Test
    void aFailedTailCanBeRetried() {
        FencedLease lease = acquire();
        memory.setUnavailable(true);
        StepVerifier.create(lease.releaseNoSoonerThan(Duration.ofSeconds(5))).verifyError(dev.fenced.lock.LockServiceException.class);
        memory.setUnavailable(false);

        tail(lease, Duration.ofSeconds(5), ReleaseOutcome.LEFT_TO_EXPIRE);
        assertThat(memory.remainingTime(LOCK)).contains(Duration.ofSeconds(5));
    }

    @Test
    void badDurationsAreRejected() {
        FencedLease lease = acquire();
        StepVerifier.create(lease.releaseNoSoonerThan(Duration.ofMillis(-1)))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(IllegalArgumentException.class)
                        .hasMessage("sinceGrant must be between 0 and 1 day, was PT-0.001S"));
        StepVerifier.create(lease.releaseNoSoonerThan(Duration.ofDays(2)))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(IllegalArgumentException.class)
                        .hasMessage("sinceGrant must be between 0 and 1 day, was PT48H"));
        assertThat(lease.isHeld()).isTrue();
        assertThat(AcquireOptions.defaults()).isEqualTo(AcquireOptions.defaults());
    }

    /**
     * Closing the client while a tail waits for a renewal in flight (replies 500 ms late) waits for the renewal and
     * the tail, within its bound, and the tail's Mono ends whatever happens: it does not hang on the stopped renewer.
     */
    @Test
    void aTailWaitingForARenewalInFlightEndsWhenTheClientIsClosed() {
        FencedLease lease = client.acquire(LOCK).block(Duration.ofSeconds(1));
        assertThat(lease).isNotNull();
        memory.setReplyDelay(Duration.ofMillis(500));
        elapse(1_100); // the renewal sent at 1 s is answered at 1.5 s

        CompletableFuture<ReleaseOutcome> tail = lease.releaseNoSoonerThan(Duration.ofSeconds(10)).toFuture();
        CompletableFuture<Void> closed = client.closeLater().toFuture();
        elapse(10_000);

        assertThat(closed).succeedsWithin(Duration.ofSeconds(10));
        assertThat(tail).as("the tail was written after the renewal, before the store closed").isDone()
                .isCompletedWithValue(ReleaseOutcome.LEFT_TO_EXPIRE);
    }
}
