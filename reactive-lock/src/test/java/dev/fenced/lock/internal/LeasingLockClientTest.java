package dev.fenced.lock.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.AmbiguousLeaseException;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.LockAcquireTimeoutException;
import dev.fenced.lock.LockClientClosedException;
import dev.fenced.lock.LockServiceException;
import dev.fenced.lock.LossReason;
import dev.fenced.lock.ReleaseOutcome;
import dev.fenced.lock.StaleFencingTokenException;
import dev.fenced.lock.internal.memory.InMemoryLeaseStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;
import java.util.concurrent.atomic.AtomicReference;
import reactor.core.CoreSubscriber;
import reactor.core.publisher.Operators;
import dev.fenced.lock.FencedLockClient;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/**
 * The lease lifecycle in virtual time, over the in-memory store: lease time 3 s, renewal every 1 s,
 * deadline 3 s − 32 ms (1% + 2 ms drift allowance) after the acquire was sent.
 */
class LeasingLockClientTest {

    private static final String LOCK = "invoice:42";
    private static final Duration DEADLINE = Duration.ofMillis(2_968);

    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();
    private final InMemoryLeaseStore memory = new InMemoryLeaseStore(clock);
    private final CountingLeaseStore store = new CountingLeaseStore(memory);
    private final LeasingLockClient client = LeasingLockClient.create(store,
            ClientSettings.of("test:", Duration.ofSeconds(3), null, Duration.ofSeconds(10), null, clock));

    @AfterEach
    void tearDown() {
        clock.dispose();
    }

    private FencedLease acquire(String name) {
        FencedLease lease = client.acquire(name).block(Duration.ofSeconds(1));
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
    void acquireEmitsALeaseThatTheStoreHolds() {
        FencedLease lease = acquire(LOCK);

        assertThat(lease.name()).isEqualTo(LOCK);
        assertThat(lease.token()).isEqualTo(1);
        assertThat(lease.ownerId()).isNotBlank().doesNotContain(":");
        assertThat(lease.leaseTime()).isEqualTo(Duration.ofSeconds(3));
        assertThat(lease.remainingValidity()).isEqualTo(DEADLINE);
        assertThat(lease.isHeld()).isTrue();
        assertThat(memory.holder(LOCK)).contains(lease.ownerId() + ":1");
    }

    @Test
    void tokensStrictlyIncreaseAcrossHandoffs() {
        long previous = 0;
        for (int i = 0; i < 20; i++) {
            FencedLease lease = acquire(LOCK);
            assertThat(lease.token()).isGreaterThan(previous);
            previous = lease.token();
            StepVerifier.create(lease.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();
        }
    }

    @Test
    void tryAcquireCompletesEmptyWhenTheLockIsHeld() {
        acquire(LOCK);
        StepVerifier.create(client.tryAcquire(LOCK)).verifyComplete();
        StepVerifier.create(client.acquire(LOCK, AcquireOptions.tryOnce())).verifyComplete();
    }

    @Test
    void renewalKeepsTheLeaseAcrossManyLeaseTimes() {
        FencedLease lease = acquire(LOCK);

        elapse(30_000);

        assertThat(lease.isHeld()).isTrue();
        assertThat(lease.lost().toFuture()).isNotDone();
        assertThat(memory.holder(LOCK)).contains(lease.ownerId() + ":1");
        assertThat(store.renewBatches).hasSize(30);
    }

    @Test
    void renewalMovesTheDeadlineFromWhenTheRenewalWasSent() {
        FencedLease lease = acquire(LOCK);
        elapse(1_000);
        assertThat(lease.remainingValidity()).isEqualTo(DEADLINE);
        elapse(500);
        assertThat(lease.remainingValidity()).isEqualTo(DEADLINE.minusMillis(500));
    }

    @Test
    void leasesTakenTogetherAreRenewedInOneStoreCall() {
        for (int i = 0; i < 10; i++) {
            acquire("batch-" + i);
            elapse(20); // within a quarter of the renewal period of each other
        }
        elapse(1_000);
        assertThat(store.renewBatches).containsExactly(10);
    }

    @Test
    void leaseIsLostAtItsDeadlineWhenRenewalsFail() {
        FencedLease lease = acquire(LOCK);
        memory.setUnavailable(true);

        elapse(DEADLINE.toMillis() - 1);
        assertThat(lease.isHeld()).isTrue();
        assertThat(lease.lost().toFuture()).isNotDone();
        assertThat(store.renewBatches.size()).as("renewal retried").isGreaterThan(1);

        elapse(1);
        assertThat(lease.isHeld()).isFalse();
        assertThat(lease.remainingValidity()).isZero();
        LeaseLostException loss = lossOf(lease);
        assertThat(loss.reason()).isEqualTo(LossReason.EXPIRED);
        assertThat(loss).hasMessage("Lease on lock 'invoice:42' with fencing token 1 was lost: "
                + "its validity deadline passed without a successful renewal");
    }

    @Test
    void renewalSucceedingAfterTransientFailuresKeepsTheLease() {
        FencedLease lease = acquire(LOCK);
        memory.setUnavailable(true);
        elapse(2_000);
        memory.setUnavailable(false);
        elapse(2_000);
        assertThat(lease.isHeld()).isTrue();
        assertThat(lease.lost().toFuture()).isNotDone();
    }

    @Test
    void notHeldReplyLosesTheLeaseAtOnce() {
        FencedLease lease = acquire(LOCK);
        memory.deleteLock(LOCK);

        elapse(999);
        assertThat(lease.lost().toFuture()).isNotDone();

        elapse(1);
        assertThat(lossOf(lease).reason()).isEqualTo(LossReason.NOT_HELD);
        assertThat(lease.isHeld()).isFalse();
    }

    @Test
    void withLeaseCancelsTheWorkAndFailsWhenTheLeaseIsLost() {
        AtomicBoolean cancelled = new AtomicBoolean();
        StepVerifier.create(client.withLease(LOCK, lease -> Flux.never().doOnCancel(() -> cancelled.set(true))))
                .expectSubscription()
                .then(() -> memory.deleteLock(LOCK))
                .then(() -> elapse(1_000))
                .verifyErrorSatisfies(e -> {
                    assertThat(e).isInstanceOf(LeaseLostException.class).hasMessage("Lease on lock 'invoice:42' with "
                            + "fencing token 1 was lost: the lock service no longer holds it (expired there, deleted, or taken over)");
                    LeaseLostException loss = (LeaseLostException) e;
                    assertThat(loss.lockName()).isEqualTo(LOCK);
                    assertThat(loss.token()).isEqualTo(1);
                    assertThat(loss.reason()).isEqualTo(LossReason.NOT_HELD);
                });
        assertThat(cancelled).isTrue();
    }

    @Test
    void withLeaseReleasesWhenTheWorkCompletes() {
        StepVerifier.create(client.withLease(LOCK, lease -> Mono.just(lease.token())))
                .expectNext(1L)
                .verifyComplete();
        assertThat(memory.holder(LOCK)).isEmpty();
        assertThat(client.heldLeaseList()).isEmpty();
    }

    @Test
    void withLeaseReleasesWhenTheWorkFails() {
        IllegalStateException failure = new IllegalStateException("boom");
        StepVerifier.create(client.withLease(LOCK, lease -> Mono.error(failure)))
                .verifyErrorSatisfies(e -> assertThat(e).isSameAs(failure));
        assertThat(memory.holder(LOCK)).isEmpty();
    }

    @Test
    void withLeaseReleasesWhenTheSubscriberCancels() {
        StepVerifier.create(client.withLease(LOCK, lease -> Flux.never()))
                .expectSubscription()
                .then(() -> assertThat(memory.holder(LOCK)).isPresent())
                .thenCancel()
                .verify();
        assertThat(memory.holder(LOCK)).isEmpty();
    }

    @Test
    void withLeaseReleasesWhenTheWorkThrows() {
        StepVerifier.create(client.withLease(LOCK, lease -> {
            throw new IllegalArgumentException("bad work");
        })).verifyErrorMessage("bad work");
        assertThat(memory.holder(LOCK)).isEmpty();
    }

    @Test
    void theLeaseIsInTheContextOfTheWork() {
        StepVerifier.create(client.withLease(LOCK, lease -> Mono.zip(
                        FencedLease.current(LOCK).map(FencedLease::token),
                        FencedLease.current().map(FencedLease::name))))
                .assertNext(t -> {
                    assertThat(t.getT1()).isEqualTo(1L);
                    assertThat(t.getT2()).isEqualTo(LOCK);
                })
                .verifyComplete();
        StepVerifier.create(FencedLease.current(LOCK)).verifyComplete();
    }

    @Test
    void nestedWithLeaseReusesTheLeaseAndLeavesItHeld() {
        Flux<String> nested = client.withLease(LOCK, outer -> client.withLease(LOCK, inner -> Mono.just(inner.token()))
                .map(innerToken -> innerToken + "/" + outer.token() + "/" + memory.holder(LOCK).isPresent()));
        StepVerifier.create(nested).expectNext("1/1/true").verifyComplete();
        assertThat(memory.holder(LOCK)).isEmpty();
        assertThat(store.acquires).hasValue(1);
    }

    @Test
    void nestedAcquireReturnsAViewWhoseReleaseIsRetained() {
        StepVerifier.create(client.withLease(LOCK, outer -> client.acquire(LOCK).flatMap(FencedLease::release)))
                .expectNext(ReleaseOutcome.RETAINED)
                .verifyComplete();
    }

    @Test
    void aServerThatLostItsDataLosesEveryHeldLeaseAtOnceAndCancelsTheWork() {
        FencedLease a = acquire("a");
        FencedLease b = acquire("b");
        StepVerifier.create(client.withLease("c", c -> Flux.interval(Duration.ofMillis(100), clock)))
                .then(() -> elapse(250))
                .expectNextCount(2)
                .then(memory::restart)
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(LeaseLostException.class)
                        .extracting(x -> ((LeaseLostException) x).reason()).isEqualTo(LossReason.SERVER_CHANGED));
        assertThat(lossOf(a).reason()).isEqualTo(LossReason.SERVER_CHANGED);
        assertThat(lossOf(b).reason()).isEqualTo(LossReason.SERVER_CHANGED);
        assertThat(client.heldLeases()).isZero();
        assertThat(acquire("a").isHeld()).as("the new server grants again").isTrue();
    }

    @Test
    void differentNamesNestIndependently() {
        StepVerifier.create(client.withLease("a", a -> client.withLease("b", b -> FencedLease.current("a")
                        .zipWith(FencedLease.current("b"), (x, y) -> x.name() + y.name()))))
                .expectNext("ab")
                .verifyComplete();
    }

    @Test
    void theUnnamedCurrentLeaseRefusesToGuessBetweenTwoLocks() {
        StepVerifier.create(client.withLease("a", a -> client.withLease("b", b -> FencedLease.current())))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(AmbiguousLeaseException.class)
                        .hasMessage("FencedLease.current() cannot tell which lease to use: the Reactor Context holds leases on "
                                + "'a', 'b'; name the lock that guards it"));
        StepVerifier.create(client.withLease("a", a -> client.withLease("a", again -> FencedLease.current().map(FencedLease::name))))
                .as("one lock, nested twice, is one lease")
                .expectNext("a")
                .verifyComplete();
    }

    @Test
    void aLeaseKnowsTheFullIdentityOfItsLock() {
        StepVerifier.create(client.withLease(LOCK, lease -> Mono.just(lease.lockId())))
                .expectNext("test:{" + LOCK + "}")
                .verifyComplete();
    }

    @Test
    void waiterAcquiresWhenTheHolderReleases() {
        FencedLease holder = acquire(LOCK);
        CompletableFuture<FencedLease> waiting = client.acquire(LOCK).toFuture();

        elapse(2_000);
        assertThat(waiting).isNotDone();

        holder.release().block(Duration.ofSeconds(1));
        assertThat(waiting).isCompleted();
        assertThat(waiting.join().token()).isEqualTo(2);
    }

    @Test
    void waiterAcquiresSoonAfterTheHoldersLeaseRunsOut() {
        memory.acquire(LOCK, "stalled-holder", 3_000, 0).block();
        CompletableFuture<FencedLease> waiting = client.acquire(LOCK).toFuture();
        int attemptsAfterFirst = store.acquires.get();

        elapse(2_999);
        assertThat(waiting).isNotDone();
        assertThat(store.acquires.get()).as("no polling while the holder's lease runs").isEqualTo(attemptsAfterFirst);

        elapse(100);
        assertThat(waiting).isCompleted();
        assertThat(waiting.join().token()).isEqualTo(2);
    }

    @Test
    void acquireFailsWithATimeoutCarryingTheWait() {
        memory.acquire(LOCK, "other", 60_000, 0).block();
        StepVerifier.create(client.acquire(LOCK, AcquireOptions.defaults().withMaxWait(Duration.ofSeconds(5))))
                .expectSubscription()
                .then(() -> elapse(5_000))
                .verifyErrorSatisfies(e -> {
                    assertThat(e).isInstanceOf(LockAcquireTimeoutException.class)
                            .hasMessage("Timed out after 5000 ms waiting for lock 'invoice:42'");
                    assertThat(((LockAcquireTimeoutException) e).waited()).isEqualTo(Duration.ofSeconds(5));
                });
    }

    @Test
    void cancelledAcquireLeavesNoLockBehind() {
        memory.setReplyDelay(Duration.ofMillis(100));
        Disposable pending = client.acquire(LOCK).subscribe();
        assertThat(memory.holder(LOCK)).as("the acquire reached the store").isPresent();

        pending.dispose();
        elapse(100); // the reply arrives; the abandoned lease is released
        elapse(100); // the release's reply
        assertThat(memory.holder(LOCK)).isEmpty();
        assertThat(client.heldLeaseList()).isEmpty();
    }

    @Test
    void acquireTimingOutDuringAnAttemptLeavesNoLockBehind() {
        memory.setReplyDelay(Duration.ofSeconds(2));
        StepVerifier.create(client.acquire(LOCK, AcquireOptions.defaults().withMaxWait(Duration.ofSeconds(1))))
                .expectSubscription()
                .then(() -> elapse(1_000))
                .expectError(LockAcquireTimeoutException.class)
                .verify();
        elapse(5_000);
        assertThat(memory.holder(LOCK)).isEmpty();
        assertThat(client.heldLeaseList()).isEmpty();
    }

    @Test
    void failedAcquireThatMayHaveRunIsUndoneByOwner() {
        // A timeout: the script may have run before the reply was lost.
        memory.failNextAcquire(LockServiceException.of(LOCK, "acquire", "no reply within the command timeout of 1000 ms", null));
        StepVerifier.create(client.acquire(LOCK))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(LockServiceException.class)
                        .hasMessage("Lock service failed to acquire for lock 'invoice:42': "
                                + "no reply within the command timeout of 1000 ms"));
        assertThat(store.releases).as("an undo was attempted").hasValue(1);
    }

    @Test
    void anAcquireRefusedByAnUnavailableStoreIsNotUndone() {
        memory.setUnavailable(true);
        StepVerifier.create(client.acquire(LOCK))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(LockServiceException.class)
                        .hasMessage("Lock service failed to acquire for lock 'invoice:42': "
                                + "the in-memory store is unavailable (simulated)"));
        assertThat(store.releases).as("the command never left").hasValue(0);
    }

    /**
     * The memory store, except that every acquire runs and then loses its reply to a reset, and the first
     * {@code refused} releases (every release counted in {@code attempts}) find the service unreachable.
     */
    private LeaseStore replyLostAndReleasesRefused(int refused, AtomicInteger attempts) {
        return new CountingLeaseStore(memory) {
            @Override
            public Mono<AcquireReply> acquire(String name, String owner, long leaseMillis, long floor) {
                return super.acquire(name, owner, leaseMillis, floor)
                        .then(Mono.error(LockServiceException.of(name, "acquire", "connection reset", null)));
            }

            @Override
            public Mono<Boolean> release(String name, String owner, @Nullable Long token) {
                return Mono.defer(() -> attempts.incrementAndGet() <= refused
                        ? Mono.error(LockServiceException.of(name, "release", "not connected to Redis (reconnecting)", null))
                        : super.release(name, owner, token));
            }
        };
    }

    @Test
    void anAcquireWhoseReplyWasLostIsUndoneOnceTheServiceAnswersAgain() {
        AtomicInteger refusedReleases = new AtomicInteger();
        // The script runs, the reply is lost to a reset, and the connection stays down for a while.
        LeaseStore flaky = replyLostAndReleasesRefused(3, refusedReleases);
        LeasingLockClient lossy = LeasingLockClient.create(flaky,
                ClientSettings.of("test:", Duration.ofSeconds(3), null, Duration.ofSeconds(10), null, clock));

        StepVerifier.create(lossy.tryAcquire(LOCK)).verifyError(LockServiceException.class);
        assertThat(memory.holder(LOCK)).as("the script ran").isPresent();

        elapse(1_000); // well inside the lease: the undo is retried with back-off until it gets through
        assertThat(refusedReleases).hasValueGreaterThan(3);
        assertThat(memory.holder(LOCK)).as("undone before the lease ran out").isEmpty();
    }

    @Test
    void aLeaseDroppedByADisposedLambdaSubscriberIsReleasedOnceTheHookIsInstalled() {
        FencedLockClient.releaseLeasesDroppedBySubscribers();
        FencedLease lease = acquire(LOCK);
        // A source that emits after its lambda subscriber was disposed, as an acquire reply racing a dispose does.
        AtomicReference<CoreSubscriber<? super FencedLease>> late = new AtomicReference<>();
        Disposable lambda = Mono.<FencedLease>fromDirect(subscriber -> {
            late.set((CoreSubscriber<? super FencedLease>) subscriber);
            subscriber.onSubscribe(Operators.emptySubscription());
        }).subscribe(l -> { });
        lambda.dispose();

        late.get().onNext(lease);

        assertThat(memory.holder(LOCK)).as("released, not renewed until close").isEmpty();
        assertThat(lease.isHeld()).isFalse();
    }

    @Test
    void releaseIsIdempotent() {
        FencedLease lease = acquire(LOCK);
        StepVerifier.create(lease.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();
        StepVerifier.create(lease.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();
        assertThat(store.releases).hasValue(1);
        StepVerifier.create(lease.lost()).verifyComplete();
        assertThat(lease.isHeld()).isFalse();
    }

    @Test
    void releaseIsColdUntilSubscribed() {
        FencedLease lease = acquire(LOCK);
        Mono<ReleaseOutcome> release = lease.release();
        assertThat(memory.holder(LOCK)).isPresent();
        release.block(Duration.ofSeconds(1));
        assertThat(memory.holder(LOCK)).isEmpty();
    }

    @Test
    void releaseAfterLossReportsNotHeld() {
        FencedLease lease = acquire(LOCK);
        memory.deleteLock(LOCK);
        elapse(1_000);
        assertThat(lossOf(lease).reason()).isEqualTo(LossReason.NOT_HELD);
        int releasesBefore = store.releases.get();

        StepVerifier.create(lease.release()).expectNext(ReleaseOutcome.NOT_HELD).verifyComplete();
        assertThat(store.releases).as("nothing to delete").hasValue(releasesBefore);
    }

    @Test
    void releaseOfALeaseLostUnnoticedReportsNotHeldAndSignalsTheLoss() {
        FencedLease lease = acquire(LOCK);
        memory.acquire(LOCK, "ghost", 1, 0).block(); // no-op while held
        memory.deleteLock(LOCK);
        memory.acquire(LOCK, "next-holder", 60_000, 0).block();

        StepVerifier.create(lease.release()).expectNext(ReleaseOutcome.NOT_HELD).verifyComplete();
        assertThat(lossOf(lease).reason()).isEqualTo(LossReason.NOT_HELD);
        assertThat(memory.holder(LOCK)).hasValueSatisfying(v -> assertThat(v).startsWith("next-holder:"));
    }

    @Test
    void releaseAfterExpiryByOurClockStillFreesTheKey() {
        FencedLease lease = acquire(LOCK);
        memory.setUnavailable(true);
        elapse(DEADLINE.toMillis());
        assertThat(lossOf(lease).reason()).isEqualTo(LossReason.EXPIRED);
        memory.setUnavailable(false);
        memory.acquire(LOCK, lease.ownerId(), 60_000, 0).block(); // as if the key were still there

        StepVerifier.create(lease.release()).expectNext(ReleaseOutcome.NOT_HELD).verifyComplete();
        assertThat(memory.holder(LOCK)).isEmpty();
    }

    @Test
    void failedReleaseCanBeRetried() {
        FencedLease lease = acquire(LOCK);
        memory.setUnavailable(true);
        StepVerifier.create(lease.release()).verifyError(LockServiceException.class);
        memory.setUnavailable(false);
        StepVerifier.create(lease.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();
        assertThat(memory.holder(LOCK)).isEmpty();
    }

    @Test
    void badNamesAreRejectedBeforeAnyIo() {
        List<String> messages = new ArrayList<>();
        for (String name : new String[] {null, "", "   ", "x".repeat(1025), "a\nb", "a{b}"}) {
            StepVerifier.create(client.acquire(name))
                    .verifyErrorSatisfies(e -> {
                        assertThat(e).isInstanceOf(IllegalArgumentException.class);
                        messages.add(e.getMessage());
                    });
        }
        StepVerifier.create(client.withLease("  ", lease -> Mono.just(1))).verifyError(IllegalArgumentException.class);
        assertThat(messages).containsExactly(
                "Lock name must not be null",
                "Lock name must not be blank",
                "Lock name must not be blank",
                "Lock name must be at most 1024 characters, was 1025",
                "Lock name must not contain control characters, was 'a?b'",
                "Lock name must not contain braces, was 'a{b}'");
        assertThat(store.calls()).isZero();
    }

    @Test
    void nullArgumentsAreRejectedBeforeAnyIo() {
        StepVerifier.create(client.acquire(LOCK, null)).verifyErrorMessage("options must not be null");
        StepVerifier.create(client.withLease(LOCK, null)).verifyErrorMessage("work must not be null");
        assertThat(store.calls()).isZero();
    }

    @Test
    void acquireIsColdUntilSubscribed() {
        Mono<FencedLease> acquire = client.acquire(LOCK);
        assertThat(store.calls()).isZero();
        acquire.block(Duration.ofSeconds(1));
        assertThat(store.acquires).hasValue(1);
    }

    @Test
    void closedClientRejectsAcquires() {
        client.closeLater().block(Duration.ofSeconds(1));
        StepVerifier.create(client.acquire(LOCK))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(LockClientClosedException.class)
                        .hasMessage("The lock client is closed; cannot acquire lock 'invoice:42'"));
        assertThat(store.calls()).isZero();
    }

    @Test
    void closeReleasesHeldLeasesAndSignalsTheirLoss() {
        FencedLease lease = acquire(LOCK);
        client.closeLater().block(Duration.ofSeconds(1));

        assertThat(memory.holder(LOCK)).isEmpty();
        assertThat(lossOf(lease).reason()).isEqualTo(LossReason.CLIENT_CLOSED);
        StepVerifier.create(lease.release()).expectNext(ReleaseOutcome.NOT_HELD).verifyComplete();
        StepVerifier.create(client.closeLater()).verifyComplete();
    }

    @Test
    void closeReleasesHeldLeasesBeforeItClosesTheStore() {
        AtomicBoolean storeClosed = new AtomicBoolean();
        // A store that refuses every statement from the moment close() is called, as PostgreSQL's did.
        CountingLeaseStore refusing = new CountingLeaseStore(memory) {
            @Override
            public Mono<Boolean> release(String name, String owner, @Nullable Long token) {
                return Mono.defer(() -> storeClosed.get()
                        ? Mono.error(LockServiceException.of(name, "release", "the lock client is closed", null))
                        : super.release(name, owner, token));
            }

            @Override
            public Mono<Void> close() {
                storeClosed.set(true);
                return Mono.empty();
            }
        };
        LeasingLockClient closing = LeasingLockClient.create(refusing,
                ClientSettings.of("test:", Duration.ofSeconds(3), null, Duration.ofSeconds(10), null, clock));
        FencedLease lease = closing.acquire(LOCK).block(Duration.ofSeconds(1));
        assertThat(lease).isNotNull();

        closing.closeLater().block(Duration.ofSeconds(1));

        assertThat(storeClosed).isTrue();
        assertThat(memory.holder(LOCK)).as("released before the store closed").isEmpty();
        assertThat(lossOf(lease).reason()).isEqualTo(LossReason.CLIENT_CLOSED);
    }

    @Test
    void aReleaseThatFailsOnCloseIsLoggedWithTheLockNameAndTheCause() {
        LeaseStore refusing = new CountingLeaseStore(memory) {
            @Override
            public Mono<Boolean> release(String name, String owner, @Nullable Long token) {
                return Mono.error(LockServiceException.of(name, "release", "unreachable", null));
            }
        };
        LeasingLockClient closing = LeasingLockClient.create(refusing,
                ClientSettings.of("test:", Duration.ofSeconds(3), null, Duration.ofSeconds(10), null, clock));
        FencedLease lease = closing.acquire(LOCK).block(Duration.ofSeconds(1));
        assertThat(lease).isNotNull();
        ch.qos.logback.classic.Logger logger = (ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory.getLogger(HeldLease.class);
        ch.qos.logback.core.read.ListAppender<ch.qos.logback.classic.spi.ILoggingEvent> events =
                new ch.qos.logback.core.read.ListAppender<>();
        events.start();
        logger.addAppender(events);
        try {
            closing.closeLater().block(Duration.ofSeconds(5));
        } finally {
            logger.detachAppender(events);
        }
        assertThat(events.list).extracting(ch.qos.logback.classic.spi.ILoggingEvent::getFormattedMessage)
                .containsExactly("Could not release lock 'invoice:42' token " + lease.token() + " on close; it expires with its"
                        + " lease: dev.fenced.lock.LockServiceException: Lock service failed to release for lock 'invoice:42':"
                        + " unreachable");
    }

    @Test
    void closeRunsTheUndoOfAnAbandonedAcquireThatWaitsOutItsBackOff() {
        // The acquire runs but its reply is lost, and the first undo finds the service unreachable.
        LeaseStore lossy = replyLostAndReleasesRefused(1, new AtomicInteger());
        LeasingLockClient closing = LeasingLockClient.create(lossy,
                ClientSettings.of("test:", Duration.ofSeconds(3), null, Duration.ofSeconds(10), null, clock));
        StepVerifier.create(closing.tryAcquire(LOCK)).verifyError(LockServiceException.class);
        assertThat(memory.holder(LOCK)).as("taken by the acquire whose reply was lost").isPresent();

        // The retry waits on the client's clock, which does not move: only close can run it.
        closing.closeLater().block(Duration.ofSeconds(5));

        assertThat(memory.holder(LOCK)).as("undone before the store closed").isEmpty();
    }

    @Test
    void closeGoesOnUndoingAFailedAcquireUntilItsLateGrantWindowHasPassed() {
        AtomicReference<String> failedOwner = new AtomicReference<>();
        LeasingLockClient closing = LeasingLockClient.create(failingWithALateGrantWindow(Duration.ZERO, failedOwner),
                ClientSettings.of("test:", Duration.ofSeconds(3), null, Duration.ofSeconds(10), null, clock));
        StepVerifier.create(closing.tryAcquire(LOCK)).verifyError(LockServiceException.class);
        CompletableFuture<Void> closed = closing.closeLater().toFuture();
        elapse(100);

        memory.acquire(LOCK, failedOwner.get(), 60_000, 0).block(); // the late grant, after close began
        elapse(300);
        assertThat(memory.holder(LOCK)).as("the late grant is undone while the client closes").isEmpty();
        assertThat(closed).as("close waits out the window").isNotDone();

        elapse(5_000);
        assertThat(closed).as("closed once the window has passed").isCompleted();
    }

    @Test
    void anAcquireThatFailsWhileTheClientClosesIsUndoneUntilItsLateGrantWindowHasPassed() {
        AtomicReference<String> failedOwner = new AtomicReference<>();
        LeasingLockClient closing = LeasingLockClient.create(failingWithALateGrantWindow(Duration.ofMillis(100), failedOwner),
                ClientSettings.of("test:", Duration.ofSeconds(3), null, Duration.ofSeconds(10), null, clock));
        CompletableFuture<FencedLease> acquiring = closing.tryAcquire(LOCK).toFuture();
        CompletableFuture<Void> closed = closing.closeLater().toFuture();
        elapse(100); // the acquire fails after close began; its undo starts then
        assertThat(acquiring).isCompletedExceptionally();

        memory.acquire(LOCK, failedOwner.get(), 60_000, 0).block(); // the late grant
        elapse(300);
        assertThat(memory.holder(LOCK)).as("the late grant is undone while the client closes").isEmpty();
        assertThat(closed).as("close waits out the window").isNotDone();

        elapse(5_000);
        assertThat(closed).as("closed once the window has passed").isCompleted();
    }

    /**
     * The memory store, except that every acquire fails without a reply after {@code after} (on the client's
     * clock) and takes nothing yet, its owner kept in {@code failedOwner}; and the store says that such an
     * acquire may still take effect for 5 s (a PostgreSQL statement that waits on a row lock and whose cancel
     * could not be sent).
     */
    private LeaseStore failingWithALateGrantWindow(Duration after, AtomicReference<String> failedOwner) {
        return new CountingLeaseStore(memory) {
            @Override
            public Mono<AcquireReply> acquire(String name, String owner, long leaseMillis, long floor) {
                failedOwner.set(owner);
                Mono<AcquireReply> reset = Mono.error(LockServiceException.of(name, "acquire", "connection reset", null));
                return after.isZero() ? reset : Mono.delay(after, clock).then(reset);
            }

            @Override
            public Duration lateGrantWindow() {
                return Duration.ofSeconds(5);
            }
        };
    }

    @Test
    void closeEndsWaitsInProgress() {
        memory.acquire(LOCK, "other", 60_000, 0).block();
        CompletableFuture<FencedLease> waiting = client.acquire(LOCK).toFuture();
        client.closeLater().block(Duration.ofSeconds(1));
        assertThat(waiting).isCompletedExceptionally();
        assertThat(waiting.handle((l, e) -> e).join()).isInstanceOf(LockClientClosedException.class);
    }

    @Test
    void raisedFloorMovesTheNextTokenPastIt() {
        client.raiseFloor(LOCK, 100);
        assertThat(acquire(LOCK).token()).isEqualTo(101);
    }

    @Test
    void perCallLeaseTimeIsRenewedAtTheSameRatio() {
        // A command timeout short enough for a 1.5 s lease renewed every 0.5 s (the default third of 3 s is not).
        LeasingLockClient client = LeasingLockClient.create(store,
                ClientSettings.of("test:", Duration.ofSeconds(3), null, Duration.ofSeconds(10), Duration.ofMillis(500), clock));
        FencedLease lease = client.acquire(LOCK, AcquireOptions.defaults().withLeaseTime(Duration.ofMillis(1_500)))
                .block(Duration.ofSeconds(1));
        assertThat(lease).isNotNull();
        elapse(5_000);
        assertThat(lease.isHeld()).isTrue();
        assertThat(lease.leaseTime()).isEqualTo(Duration.ofMillis(1_500));
        assertThat(store.renewBatches).hasSize(10);
    }

    @Test
    void leaseTimeNoLongerThanTheCommandTimeoutIsRefused() {
        StepVerifier.create(client.acquire(LOCK, AcquireOptions.defaults().withLeaseTime(Duration.ofSeconds(1))))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(IllegalArgumentException.class)
                        .hasMessage("leaseTime (PT1S) must be longer than the command timeout (PT1S): a lease that can run "
                                + "out before a reply arrives cannot be renewed"));
        assertThat(store.calls()).isZero();
    }

    @Test
    void rejectedWriteLosesTheLeaseFreesTheKeyAndRaisesTheNextToken() {
        FencedLease lease = acquire(LOCK);
        StaleFencingTokenException rejection = StaleFencingTokenException.of(LOCK, "invoices (id = 42)", 1, 40, "other");
        lease.reportRejectedWrite(rejection);
        LeaseLostException loss = lossOf(lease);
        assertThat(loss.reason()).isEqualTo(LossReason.SUPERSEDED);
        assertThat(loss).hasCause(rejection);
        assertThat(loss).hasMessageEndingWith("was lost: storage already holds a newer fencing token");
        assertThat(memory.holder(LOCK)).isEmpty();
        StepVerifier.create(lease.release()).expectNext(ReleaseOutcome.NOT_HELD).verifyComplete();
        assertThat(acquire(LOCK).token()).isEqualTo(41);
    }

    @Test
    void rejectedWriteCancelsTheWorkOfWithLease() {
        StepVerifier.create(client.withLease(LOCK, lease -> {
                    lease.reportRejectedWrite(StaleFencingTokenException.of(LOCK, "t", lease.token(), lease.token() + 1, null));
                    return Flux.never();
                }))
                .verifyErrorSatisfies(e -> assertThat(((LeaseLostException) e).reason()).isEqualTo(LossReason.SUPERSEDED));
    }

    @Test
    void aReleaseHandsTheLockToTheOldestWaiterInOneStoreCallAndWaitersAreServedInOrder() {
        FencedLease holder = acquire(LOCK);
        List<CompletableFuture<FencedLease>> waiters = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            waiters.add(client.acquire(LOCK).toFuture());
        }
        int callsBefore = store.calls();

        holder.release().block(Duration.ofSeconds(1));
        assertThat(waiters.get(0)).isCompleted();
        assertThat(waiters.subList(1, 10)).allMatch(f -> !f.isDone());
        assertThat(store.calls() - callsBefore).as("store calls for one release and the next grant").isEqualTo(1);
        assertThat(store.handoffs.get()).isEqualTo(1);

        for (int i = 0; i < 9; i++) {
            waiters.get(i).join().release().block(Duration.ofSeconds(1));
            assertThat(waiters.get(i + 1)).isCompleted();
        }
        assertThat(waiters.get(9).join().token()).isEqualTo(11);
    }

    @Test
    void aHandOffTheStoreDoesNotAnswerLosesTheReleasingLeaseAtItsDeadline() {
        // A store that holds on to a hand-off past its command timeout (the PostgreSQL store waits for a cancelled
        // acquire to end): the releasing lease is no longer renewed, so its loss must not wait for the answer.
        Sinks.One<LeaseStore.Handoff> answer = Sinks.one();
        CountingLeaseStore stuck = new CountingLeaseStore(memory) {
            @Override
            public Mono<LeaseStore.Handoff> handOff(String name, String owner, long token, String nextOwner, long leaseMillis,
                    long floor) {
                return answer.asMono();
            }
        };
        LeasingLockClient stuckClient = LeasingLockClient.create(stuck,
                ClientSettings.of("test:", Duration.ofSeconds(3), null, Duration.ofSeconds(10), null, clock));
        FencedLease holder = stuckClient.acquire(LOCK).block(Duration.ofSeconds(1));
        CompletableFuture<FencedLease> waiter = stuckClient.acquire(LOCK).toFuture();
        CompletableFuture<ReleaseOutcome> released = holder.release().toFuture();
        CompletableFuture<LeaseLostException> lost = holder.lost().toFuture();
        elapse(DEADLINE.toMillis() - 1);
        assertThat(lost).as("not lost before its deadline").isNotDone();
        assertThat(released).isNotDone();
        elapse(2);
        assertThat(lost).as("lost at its deadline, the hand-off unanswered").isCompleted();
        assertThat(lost.join().reason()).isEqualTo(LossReason.EXPIRED);
        assertThat(holder.isHeld()).isFalse();
        // The store answers late that the lease held the lock: the loss has been signalled, so it was not held.
        answer.tryEmitValue(new LeaseStore.Handoff(true, null, new IllegalStateException("the next owner's acquire failed")));
        assertThat(released).isCompletedWithValue(ReleaseOutcome.NOT_HELD);
        assertThat(waiter).isNotDone();
        waiter.cancel(true);
    }

    @Test
    void aHandOffOnADisposedSchedulerIsDecidedByItsAnswer() {
        VirtualTimeScheduler own = VirtualTimeScheduler.create();
        InMemoryLeaseStore ownMemory = new InMemoryLeaseStore(own);
        LeasingLockClient ownClient = LeasingLockClient.create(new CountingLeaseStore(ownMemory),
                ClientSettings.of("test:", Duration.ofSeconds(3), null, Duration.ofSeconds(10), null, own));
        FencedLease holder = ownClient.acquire(LOCK).block(Duration.ofSeconds(1));
        CompletableFuture<FencedLease> waiter = ownClient.acquire(LOCK).toFuture();
        own.dispose();
        // No timer can be armed: the hand-off's own answer decides (the lock passed to the waiter).
        assertThat(holder.release().block(Duration.ofSeconds(1))).isEqualTo(ReleaseOutcome.RELEASED);
        assertThat(ownMemory.lock(LOCK).block(Duration.ofSeconds(1)).token()).isEqualTo(holder.token() + 1);
        assertThat(waiter).isCompleted();
    }

    @Test
    void aHandOffAnsweredBeforeTheDeadlineLeavesNoTimerToLoseTheLease() {
        FencedLease holder = acquire(LOCK);
        CompletableFuture<FencedLease> waiter = client.acquire(LOCK).toFuture();
        assertThat(holder.release().block(Duration.ofSeconds(1))).isEqualTo(ReleaseOutcome.RELEASED);
        assertThat(store.handoffs).hasValue(1);
        CompletableFuture<LeaseLostException> lost = holder.lost().toFuture();
        elapse(DEADLINE.toMillis() * 2);
        assertThat(lost).as("completed empty on release, never lost").isCompletedWithValue(null);
        assertThat(waiter).isCompleted();
        waiter.join().release().block(Duration.ofSeconds(1));
    }

    @Test
    void afterSixteenHandOffsInARowOneReleaseGoesToEveryone() {
        FencedLease lease = acquire(LOCK);
        List<CompletableFuture<FencedLease>> waiters = new ArrayList<>();
        for (int i = 0; i < Waiters.MAX_HANDOFFS_IN_A_ROW + 2; i++) {
            waiters.add(client.acquire(LOCK).toFuture());
        }
        for (int i = 0; i < Waiters.MAX_HANDOFFS_IN_A_ROW + 1; i++) {
            lease.release().block(Duration.ofSeconds(1));
            assertThat(waiters.get(i)).as("waiter %d served", i).isCompleted();
            lease = waiters.get(i).join();
        }
        // The 17th release went to everyone: a plain release, and the head attempted on its notification.
        assertThat(store.handoffs.get()).isEqualTo(Waiters.MAX_HANDOFFS_IN_A_ROW);
        assertThat(store.releases.get()).isEqualTo(1);
        lease.release().block(Duration.ofSeconds(1));
        assertThat(store.handoffs.get()).as("hand-offs start again").isEqualTo(Waiters.MAX_HANDOFFS_IN_A_ROW + 1);
        assertThat(waiters.get(Waiters.MAX_HANDOFFS_IN_A_ROW + 1)).isCompleted();
    }

    @Test
    void theBoundOnHandOffsHoldsWhenAcquiresWaitOneAtATime() {
        // Two loops taking turns: at every release exactly one acquire waits, so its wait queue comes and goes.
        FencedLease lease = acquire(LOCK);
        int grants = 3 * (Waiters.MAX_HANDOFFS_IN_A_ROW + 1);
        for (int i = 0; i < grants; i++) {
            CompletableFuture<FencedLease> next = client.acquire(LOCK).toFuture();
            lease.release().block(Duration.ofSeconds(1));
            assertThat(next).isCompleted();
            lease = next.join();
        }
        assertThat(store.releases.get()).as("one release in seventeen goes to everyone").isEqualTo(3);
        assertThat(store.handoffs.get()).isEqualTo(grants - 3);
    }

    @Test
    void aHandOffThatFailsLeavesTheWaiterWaitingOnItsTimer() {
        FencedLease holder = acquire(LOCK);
        CompletableFuture<FencedLease> waiter = client.acquire(LOCK, AcquireOptions.defaults()
                .withMaxWait(Duration.ofSeconds(10))).toFuture();
        memory.setUnavailable(true);
        StepVerifier.create(holder.release()).verifyError(LockServiceException.class);
        assertThat(waiter).as("the release failed, not the waiter").isNotDone();
        memory.setUnavailable(false);
        elapse(3_100); // the holder's key expires; the head's timer fires a little after
        assertThat(waiter).isCompleted();
        assertThat(waiter.join().token()).isGreaterThan(holder.token());
    }

    @Test
    void aWaiterThatLeavesWhileTheHandOffIsInFlightLeavesTheLockFree() {
        FencedLease holder = acquire(LOCK);
        Disposable waiter = client.acquire(LOCK).subscribe();
        memory.setReplyDelay(Duration.ofMillis(5));
        CompletableFuture<ReleaseOutcome> released = holder.release().toFuture();
        waiter.dispose(); // before the hand-off's reply arrives
        elapse(5);
        assertThat(released).isCompletedWithValue(ReleaseOutcome.RELEASED);
        elapse(20);
        assertThat(store.handoffs.get()).isEqualTo(1);
        assertThat(memory.holder(LOCK)).as("the grant nobody took is undone").isEmpty();
        assertThat(client.heldLeaseList()).isEmpty();
    }

    @Test
    void aHandOffToALeaseThatNoLongerHoldsTheLockReportsItNotHeldAndTheWaiterStillGetsAFreeLock() {
        FencedLease holder = acquire(LOCK);
        CompletableFuture<FencedLease> waiter = client.acquire(LOCK).toFuture();
        memory.forceRelease(LOCK); // the holder's key is gone (expired in the store, deleted by hand)
        StepVerifier.create(holder.release()).expectNext(ReleaseOutcome.NOT_HELD).verifyComplete();
        assertThat(waiter).isCompleted();
        assertThat(waiter.join().token()).isGreaterThan(holder.token());
    }

    @Test
    void releasingTheLeaseInsideWithLeaseDoesNotCutTheWorkShort() {
        StepVerifier.create(client.withLease(LOCK, lease -> lease.release().thenMany(Flux.just(1, 2, 3))))
                .expectNext(1, 2, 3)
                .verifyComplete();
    }

    @Test
    void aLeaseArrivingAsTheWaitEndsIsNeverLeftHeld() {
        FencedLease holder = acquire(LOCK);
        memory.setReplyDelay(Duration.ofMillis(5));
        StepVerifier.create(client.acquire(LOCK, AcquireOptions.defaults().withMaxWait(Duration.ofMillis(1_002))))
                .expectSubscription()
                .then(() -> elapse(1_000))
                // The release wakes the waiter at 1 s; its attempt takes the lock at once, but the reply comes at
                // 1.005 s, after the wait ended at 1.002 s.
                .then(() -> holder.release().subscribe())
                .then(() -> assertThat(memory.holder(LOCK)).hasValueSatisfying(v -> assertThat(v).endsWith(":2")))
                .then(() -> elapse(2))
                .expectErrorSatisfies(e -> assertThat(e).isInstanceOf(LockAcquireTimeoutException.class))
                .verify(Duration.ofSeconds(5));
        elapse(100);
        assertThat(client.heldLeaseList()).isEmpty();
        assertThat(memory.holder(LOCK)).as("the late lease was released").isEmpty();
    }

    @Test
    void aCancelledWaiterPassesItsTurnOn() {
        FencedLease holder = acquire(LOCK);
        Disposable first = client.acquire(LOCK).subscribe();
        CompletableFuture<FencedLease> second = client.acquire(LOCK).toFuture();
        first.dispose();

        holder.release().block(Duration.ofSeconds(1));
        assertThat(second).as("woken by the release, long before the holder's lease would end").isCompleted();
    }

    @Test
    void pingAnswersAndHeldLeasesAreCounted() {
        StepVerifier.create(client.ping()).assertNext(rtt -> assertThat(rtt.isNegative()).isFalse()).verifyComplete();
        assertThat(client.heldLeases()).isZero();
        acquire(LOCK);
        assertThat(client.heldLeases()).isEqualTo(1);
        memory.setUnavailable(true);
        StepVerifier.create(client.ping()).verifyError(LockServiceException.class);
        client.closeLater().block(Duration.ofSeconds(1));
        StepVerifier.create(client.ping()).verifyError(LockClientClosedException.class);
    }

    @Test
    void failedReleaseIsReportedAsLostAtTheDeadline() {
        FencedLease lease = acquire(LOCK);
        memory.setUnavailable(true);
        StepVerifier.create(lease.release()).verifyError(LockServiceException.class);
        elapse(DEADLINE.toMillis() - 1);
        assertThat(lease.lost().toFuture()).isNotDone();
        elapse(1);
        assertThat(lossOf(lease).reason()).isEqualTo(LossReason.EXPIRED);
    }

    @Test
    void failedAcquiresWhoseCommandNeverLeftNeedNoUndo() {
        // Measured before: 10 failed tryAcquires against an unavailable store made 449 releases in 31 s.
        memory.setUnavailable(true);
        for (int i = 0; i < 10; i++) {
            StepVerifier.create(client.tryAcquire(LOCK)).verifyError(LockServiceException.class);
        }
        elapse(31_000);
        assertThat(store.releases).as("release calls").hasValue(0);
    }

    @Test
    void undosOfOneNameAreCoalescedAndBoundedByTheLease() {
        // Replies lost (the command may have run): each attempt needs an undo, retried while the store is down.
        for (int i = 0; i < 10; i++) {
            memory.hangNextAcquire();
        }
        LeasingLockClient timing = LeasingLockClient.create(store, ClientSettings.of("test:", Duration.ofSeconds(3), null,
                Duration.ofSeconds(10), Duration.ofMillis(200), clock));
        List<CompletableFuture<FencedLease>> attempts = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            attempts.add(timing.tryAcquire(LOCK).timeout(Duration.ofMillis(200), clock).toFuture());
        }
        memory.setUnavailable(true);
        elapse(200);
        assertThat(attempts).allSatisfy(f -> assertThat(f).isCompletedExceptionally());
        int afterFirstRound = store.releases.get();
        elapse(30_000);
        // One loop for the name: each round sends one release per pending owner, with back-off up to 1 s, and
        // gives up when the 3 s leases would have ended.
        assertThat(store.releases.get() - afterFirstRound).as("retried releases").isLessThanOrEqualTo(10 * 12);
        memory.setUnavailable(false);
        int before = store.releases.get();
        elapse(30_000);
        assertThat(store.releases.get()).as("nothing retried after the leases ended").isEqualTo(before);
    }

    @Test
    void aLeaseGrantedWhileTheClientClosesIsReleasedAndTheAcquireFails() {
        memory.setReplyDelay(Duration.ofMillis(100));
        CompletableFuture<FencedLease> acquiring = client.acquire(LOCK).toFuture();
        Mono<Void> closing = client.closeLater();
        closing.subscribe();
        elapse(100); // the grant arrives after close began
        elapse(100); // and its release
        assertThat(acquiring).isCompletedExceptionally();
        assertThatThrownBy(acquiring::join).hasCauseInstanceOf(LockClientClosedException.class);
        assertThat(memory.holder(LOCK)).as("the grant was released").isEmpty();
        assertThat(client.heldLeases()).isZero();
    }

    @Test
    void aSchedulerThatRejectsWorkLosesEveryLeaseLoudly() {
        reactor.core.scheduler.Scheduler own = reactor.core.scheduler.Schedulers.newSingle("rejecting", true);
        LeasingLockClient onOwn = LeasingLockClient.create(memory, ClientSettings.of("own:", Duration.ofSeconds(30), null,
                Duration.ofSeconds(10), null, own));
        FencedLease first = onOwn.acquire("a").block(Duration.ofSeconds(5));
        assertThat(first).isNotNull();
        own.dispose(); // the application disposed the scheduler it injected
        StepVerifier.create(onOwn.acquire("b"))
                .verifyErrorSatisfies(e -> assertThat(e).isExactlyInstanceOf(java.util.concurrent.RejectedExecutionException.class)
                        .hasMessageStartingWith("Cannot acquire lock 'b': the lock client's scheduler rejected work"));
        StepVerifier.create(first.lost())
                .assertNext(loss -> assertThat(loss.reason()).isEqualTo(LossReason.SCHEDULER_REJECTED))
                .verifyComplete();
    }

    @Test
    void waitersBehindTheHeadMakeNoAttemptsWhileTheHolderRenews() {
        FencedLease holder = acquire(LOCK);
        int before = store.acquires.get();
        List<CompletableFuture<FencedLease>> waiting = new ArrayList<>();
        for (int i = 0; i < 50; i++) {
            waiting.add(client.acquire(LOCK, AcquireOptions.defaults().withMaxWait(Duration.ofSeconds(30))).toFuture());
        }
        elapse(29_000);
        // Measured before: 50 waiters behind a renewing holder made 499 attempts in 30 s. Now the first waiter
        // attempts once, once more when listening is confirmed, then when its timer (bounded by the holder's
        // ~3 s lease) fires: about ten times; the 49 behind it make none.
        assertThat(store.acquires.get() - before).as("acquire attempts").isLessThanOrEqualTo(15);
        assertThat(waiting).noneMatch(CompletableFuture::isDone);
        holder.release().block(Duration.ofSeconds(1));
        assertThat(waiting.get(0)).as("the oldest waiter takes the lock").isCompleted();
        assertThat(waiting.subList(1, 50)).noneMatch(CompletableFuture::isDone);
    }

    @Test
    void aBoundOnWaitingAcquiresRefusesTheNextOneAtOnce() {
        LeasingLockClient bounded = LeasingLockClient.create(store, ClientSettings.of("test:", Duration.ofSeconds(3), null,
                Duration.ofSeconds(10), null, clock).withMaxWaitersPerLock(2));
        FencedLease holder = bounded.acquire(LOCK).block(Duration.ofSeconds(1));
        assertThat(holder).isNotNull();
        CompletableFuture<FencedLease> first = bounded.acquire(LOCK).toFuture();
        CompletableFuture<FencedLease> second = bounded.acquire(LOCK).toFuture();
        StepVerifier.create(bounded.acquire(LOCK))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(dev.fenced.lock.LockWaitQueueFullException.class)
                        .hasMessage("Lock 'invoice:42' already has 2 acquires of this client waiting for it, the most allowed "
                                + "(maxWaitersPerLock); this one was refused"));
        assertThat(first).isNotDone();
        assertThat(second).isNotDone();
    }

    @Test
    void aLeaseThatReactorDropsIsReleasedWithoutTheApplicationInstallingAnything() {
        // What timeout() does with a reply that races it, and a disposed lambda subscriber with its value.
        FencedLease lease = acquire(LOCK);
        Operators.onNextDropped(lease, reactor.util.context.Context.empty());
        assertThat(memory.holder(LOCK)).as("released, not renewed until close").isEmpty();
        assertThat(lease.isHeld()).isFalse();
    }

    @Test
    void aClientBuiltAfterOtherCodeResetTheDroppedValueHookInstallsItAgain() {
        acquire("before-the-reset").release().block(Duration.ofSeconds(1)); // a client exists: the hook was installed
        reactor.core.publisher.Hooks.resetOnNextDropped(); // what test set-ups do
        LeasingLockClient later = LeasingLockClient.create(store,
                ClientSettings.of("test:", Duration.ofSeconds(3), null, Duration.ofSeconds(10), null, clock));
        FencedLease lease = later.acquire(LOCK).block(Duration.ofSeconds(1));
        assertThat(lease).isNotNull();

        Operators.onNextDropped(lease, reactor.util.context.Context.empty()); // reaches the global hook only

        assertThat(memory.holder(LOCK)).as("released, not renewed for ever").isEmpty();
        assertThat(lease.isHeld()).isFalse();
    }

    @Test
    void buildingClientsBehindAHookHandlerThatThrowsDoesNotGrowTheHookChain() {
        acquire("before").release().block(Duration.ofSeconds(1)); // the handler is in place
        reactor.core.publisher.Hooks.onNextDroppedFail(); // a handler that throws on every value, ahead of none of ours
        try {
            int before = DroppedLeases.additions;
            for (int i = 0; i < 10; i++) {
                LeasingLockClient.create(store, ClientSettings.of("test:", Duration.ofSeconds(3), null,
                        Duration.ofSeconds(10), null, clock)).close();
            }
            assertThat(DroppedLeases.additions - before).as("handlers added to Reactor's hook by 10 builds").isZero();
        } finally {
            reactor.core.publisher.Hooks.resetOnNextDropped();
            DroppedLeases.installGlobalHook();
        }
    }

    @Test
    void aClientWhoseSchedulerWithVirtualTimeDisposedSaysTheSchedulerRejectedWork() {
        VirtualTimeScheduler virtual = VirtualTimeScheduler.create();
        LeasingLockClient onVirtualTime = LeasingLockClient.create(store,
                ClientSettings.of("test:", Duration.ofSeconds(3), null, Duration.ofSeconds(10), null, virtual));
        FencedLease held = onVirtualTime.tryAcquire("held").block(Duration.ofSeconds(1));
        assertThat(held).isNotNull();
        StepVerifier.withVirtualTime(() -> onVirtualTime.acquire("first").flatMap(FencedLease::release), () -> virtual,
                        Long.MAX_VALUE)
                .expectNext(ReleaseOutcome.RELEASED)
                .verifyComplete(); // ends by disposing the client's scheduler

        StepVerifier.create(onVirtualTime.acquire("second"))
                .verifyErrorSatisfies(e -> assertThat(e).isExactlyInstanceOf(java.util.concurrent.RejectedExecutionException.class)
                        .hasMessage("Cannot acquire lock 'second': the lock client's scheduler rejected work (it is "
                                + "disposed), so nothing could renew a lease. An injected scheduler must outlive the client: "
                                + "StepVerifier.withVirtualTime disposes its scheduler when the verification ends, so build "
                                + "a client per verification, or inject VirtualTimeScheduler.create() and dispose it after "
                                + "the client is closed"));
        LeaseLostException loss = held.lost().block(Duration.ofSeconds(1));
        assertThat(loss).isNotNull();
        assertThat(loss.reason()).isEqualTo(LossReason.SCHEDULER_REJECTED);
        assertThat(loss).hasMessage("Lease on lock 'held' with fencing token " + held.token() + " was lost: the client's "
                + "scheduler rejected work, so nothing can renew it (an injected scheduler was disposed; "
                + "StepVerifier.withVirtualTime disposes its scheduler when the verification ends)");
        assertThat(memory.holder("held")).as("not renewed, it expires in the store").isPresent();
    }

    @Test
    void aLeaseThatNoCodeCanReachIsReleasedOnceItsHandleIsCollected() throws InterruptedException {
        client.acquire(LOCK).subscribe(lease -> { }); // dropped as it arrives, as the loser of firstWithSignal drops it
        assertThat(memory.holder(LOCK)).as("granted").isPresent();
        // Bounded by the collector, not by a timer: collect until it is released, or give up after a while.
        long giveUp = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (memory.holder(LOCK).isPresent() && System.nanoTime() - giveUp < 0) {
            System.gc();
            Thread.sleep(10);
        }
        assertThat(memory.holder(LOCK)).as("released once its handle was collected").isEmpty();
        assertThat(client.heldLeases()).as("no longer renewed").isZero();
    }

    @Test
    void aLeaseHeldOnlyThroughAPendingReleaseIsNotCollectedEarly() throws InterruptedException {
        Mono<ReleaseOutcome> releaseLater = acquire(LOCK).release(); // the handle itself is no longer referenced here
        for (int i = 0; i < 20; i++) {
            System.gc();
            Thread.sleep(10);
        }
        assertThat(memory.holder(LOCK)).as("still held: the pending release keeps its handle reachable").isPresent();
        StepVerifier.create(releaseLater).expectNext(ReleaseOutcome.RELEASED).verifyComplete();
    }

    @Test
    void aLeaseNobodyReleasesIsRenewedOnlyForTheMaximumHold() {
        LeasingLockClient bounded = LeasingLockClient.create(store, ClientSettings.of("test:", Duration.ofSeconds(3), null,
                Duration.ofSeconds(10), null, clock).withMaxHold(Duration.ofSeconds(10)));
        FencedLease forgotten = bounded.acquire(LOCK).block(Duration.ofSeconds(1)); // say, the loser of firstWithSignal
        assertThat(forgotten).isNotNull();
        elapse(9_000);
        assertThat(forgotten.isHeld()).as("renewed while within the maximum hold").isTrue();
        elapse(4_000); // the renewal due at 10 s is not sent; the lease runs out at its deadline
        assertThat(lossOf(forgotten).reason()).isEqualTo(LossReason.EXPIRED);
        int renewals = store.renewBatches.size();
        elapse(30_000);
        assertThat(store.renewBatches).as("no renewal after the maximum hold").hasSize(renewals);
        assertThat(memory.holder(LOCK)).as("its key expired in the store").isEmpty();
    }

    @Test
    void aMaximumHoldNoLongerThanTheLeaseIsRefused() {
        assertThatThrownBy(() -> ClientSettings.of("test:", Duration.ofSeconds(3), null, Duration.ofSeconds(10), null, clock)
                .withMaxHold(Duration.ofSeconds(3)))
                .isInstanceOf(IllegalStateException.class)
                .hasMessage("maxHold (PT3S) must be longer than leaseTime (PT3S)");
    }

    @Test
    void theBoundOnWaitingAcquiresHoldsWhenTheHolderIsAnotherProcess() {
        // No local waiter yet: every acquire makes its first attempt, finds the lock held, and joins the queue.
        memory.acquire(LOCK, "another-process", 60_000, 0).block();
        LeasingLockClient bounded = LeasingLockClient.create(store, ClientSettings.of("test:", Duration.ofSeconds(3), null,
                Duration.ofSeconds(10), null, clock).withMaxWaitersPerLock(2));
        List<CompletableFuture<FencedLease>> acquires = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            acquires.add(bounded.acquire(LOCK).toFuture());
        }
        assertThat(acquires.subList(0, 2)).noneMatch(CompletableFuture::isDone);
        assertThat(acquires.subList(2, 5)).allSatisfy(f -> assertThatThrownBy(f::join)
                .hasCauseInstanceOf(dev.fenced.lock.LockWaitQueueFullException.class));
    }

    @Test
    void aLockServiceFailureEndsOneWaiterNotTheWholeLine() {
        FencedLease holder = acquire(LOCK);
        List<CompletableFuture<FencedLease>> waiting = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            waiting.add(client.acquire(LOCK, AcquireOptions.defaults().withMaxWait(Duration.ofSeconds(30))).toFuture());
        }
        memory.setUnavailable(true);
        elapse(3_100); // the head's timer fires: its attempt fails
        assertThat(waiting.get(0)).isCompletedExceptionally();
        assertThat(waiting.subList(1, 3)).as("the next waiters wait their timers").noneMatch(CompletableFuture::isDone);
        memory.setUnavailable(false);
        holder.release().block(Duration.ofSeconds(1));
        elapse(10_000);
        assertThat(waiting.get(1)).as("the new head takes the lock once the service is back").isCompleted();
    }
}
