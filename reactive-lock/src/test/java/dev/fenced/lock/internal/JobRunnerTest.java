package dev.fenced.lock.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.fenced.lock.FencedJob;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.JobOutcome;
import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.LockClientClosedException;
import dev.fenced.lock.LockServiceException;
import dev.fenced.lock.LossReason;
import dev.fenced.lock.internal.memory.InMemoryLeaseStore;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/**
 * Every outcome of a job's tick, in virtual time over the in-memory store: lease time 3 s, renewal every 1 s. Two
 * clients on one store stand for two instances.
 */
class JobRunnerTest {

    private static final String JOB = "job:cleanup";
    private static final FencedJob CLEANUP = FencedJob.of(JOB, Duration.ofSeconds(30));

    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();
    private final InMemoryLeaseStore memory = new InMemoryLeaseStore(clock);
    private final CountingLeaseStore store = new CountingLeaseStore(memory);
    private final LeasingLockClient client = client(store);
    private final LeasingLockClient otherInstance = client(memory);

    private LeasingLockClient client(LeaseStore leases) {
        return LeasingLockClient.create(leases,
                ClientSettings.of("test:", Duration.ofSeconds(3), null, Duration.ofSeconds(10), null, clock));
    }

    @AfterEach
    void tearDown() {
        clock.dispose();
    }

    private void elapse(long millis) {
        clock.advanceTimeBy(Duration.ofMillis(millis));
    }

    private Mono<String> taking(long millis) {
        return Mono.delay(Duration.ofMillis(millis), clock).thenReturn("done");
    }

    @Test
    void aJobThatEndsRanWithItsTokenAndDurationAndTheLockIsReleased() {
        StepVerifier.create(client.runJob(CLEANUP, taking(2_000)))
                .then(() -> elapse(2_000))
                .assertNext(outcome -> {
                    assertThat(outcome.status()).isEqualTo(JobOutcome.Status.RAN);
                    assertThat(outcome.ran()).isTrue();
                    assertThat(outcome.token()).isEqualTo(1);
                    assertThat(outcome.duration()).isEqualTo(Duration.ofSeconds(2));
                    assertThat(outcome.error()).isEmpty();
                })
                .verifyComplete();
        assertThat(memory.holder(JOB)).isEmpty();
        assertThat(client.heldLeases()).isZero();
    }

    @Test
    void theLeaseIsInTheJobsContext() {
        AtomicLong seen = new AtomicLong();
        StepVerifier.create(client.runJob(CLEANUP, () -> FencedLease.current(JOB).doOnNext(l -> seen.set(l.token()))))
                .assertNext(outcome -> assertThat(outcome.token()).isEqualTo(seen.get()).isPositive())
                .verifyComplete();
    }

    @Test
    void lockAtLeastForKeepsTheLockAfterAShortJobUntilThatLongAfterTheGrant() {
        FencedJob job = CLEANUP.withLockAtLeastFor(Duration.ofSeconds(10));
        StepVerifier.create(client.runJob(job, taking(1_500)))
                .then(() -> elapse(1_500))
                .assertNext(outcome -> assertThat(outcome.status()).isEqualTo(JobOutcome.Status.RAN))
                .verifyComplete();
        assertThat(memory.remainingTime(JOB)).contains(Duration.ofMillis(8_500));
        int renewals = store.renewRequests.size();

        StepVerifier.create(otherInstance.runJob(job, taking(0)).map(JobOutcome::status))
                .expectNext(JobOutcome.Status.SKIPPED).verifyComplete();
        elapse(8_500);
        assertThat(store.renewRequests).as("nothing renews the tail").hasSize(renewals);
        StepVerifier.create(otherInstance.runJob(job, taking(0)).map(JobOutcome::status))
                .expectNext(JobOutcome.Status.RAN).verifyComplete();
    }

    @Test
    void aLockHeldByAnotherInstanceSkipsTheTickWithoutRunningTheJob() {
        FencedLease elsewhere = otherInstance.acquire(JOB).block(Duration.ofSeconds(1));
        assertThat(elsewhere).isNotNull();
        AtomicBoolean called = new AtomicBoolean();

        StepVerifier.create(client.runJob(CLEANUP, () -> {
                    called.set(true);
                    return taking(0);
                }))
                .assertNext(outcome -> {
                    assertThat(outcome.status()).isEqualTo(JobOutcome.Status.SKIPPED);
                    assertThat(outcome.reason()).isEqualTo("the lock is held elsewhere");
                    assertThat(outcome.token()).isZero();
                })
                .verifyComplete();
        assertThat(called).isFalse();
    }

    @Test
    void aWaitThatRunsOutIsASkip() {
        otherInstance.acquire(JOB).block(Duration.ofSeconds(1));
        StepVerifier.create(client.runJob(CLEANUP.withMaxWait(Duration.ofSeconds(2)), taking(0)))
                .then(() -> elapse(2_000))
                .assertNext(outcome -> {
                    assertThat(outcome.status()).isEqualTo(JobOutcome.Status.SKIPPED);
                    assertThat(outcome.reason()).startsWith("the lock is held elsewhere: ");
                })
                .verifyComplete();
    }

    @Test
    void anOverlappingTickInTheSameInstanceIsSkippedNotQueuedNorNested() {
        CompletableFuture<JobOutcome> first = client.runJob(CLEANUP.withMaxWait(Duration.ofSeconds(10)), taking(5_000)).toFuture();
        int acquires = store.acquires.get();

        StepVerifier.create(client.runJob(CLEANUP.withMaxWait(Duration.ofSeconds(10)), taking(0)))
                .assertNext(outcome -> {
                    assertThat(outcome.status()).isEqualTo(JobOutcome.Status.SKIPPED);
                    assertThat(outcome.reason()).isEqualTo("a tick of this job is still running in this instance");
                })
                .verifyComplete();
        assertThat(store.acquires.get()).as("no acquire for the skipped tick").isEqualTo(acquires);

        elapse(5_000);
        assertThat(first.join().status()).isEqualTo(JobOutcome.Status.RAN);
        StepVerifier.create(client.runJob(CLEANUP, taking(0)).map(JobOutcome::status)).expectNext(JobOutcome.Status.RAN)
                .verifyComplete();
    }

    /** A tick started by whoever is told the last one's outcome, inside that signal, is a new tick, not an overlap. */
    @Test
    void aTickStartedWhenTheLastOutcomeArrivesRuns() {
        StepVerifier.create(client.runJob(CLEANUP, taking(0))
                        .flatMap(first -> client.runJob(CLEANUP, taking(0)).map(next -> first.status() + " then " + next.status())))
                .expectNext("RAN then RAN")
                .verifyComplete();
    }

    /** The end of a tick that another tick followed does not clear the follower's place: a third one is skipped. */
    @Test
    void theEndOfAnEarlierTickDoesNotFreeTheRunningTicksPlace() {
        CompletableFuture<JobOutcome> second = new CompletableFuture<>();
        client.runJob(CLEANUP, taking(0))
                .doOnNext(first -> client.runJob(CLEANUP, taking(5_000)).subscribe(second::complete))
                .block(Duration.ofSeconds(5));
        StepVerifier.create(client.runJob(CLEANUP, taking(0)).map(JobOutcome::status))
                .expectNext(JobOutcome.Status.SKIPPED)
                .verifyComplete();
        elapse(5_000);
        assertThat(second.join().status()).isEqualTo(JobOutcome.Status.RAN);
    }

    @Test
    void aTickInsideAScopeHoldingTheSameLockIsSkippedNotNested() {
        AtomicBoolean called = new AtomicBoolean();
        StepVerifier.create(client.withLease(JOB, outer -> client.runJob(CLEANUP, () -> {
                    called.set(true);
                    return taking(0);
                })))
                .assertNext(outcome -> {
                    assertThat(outcome.status()).isEqualTo(JobOutcome.Status.SKIPPED);
                    assertThat(outcome.reason()).isEqualTo("an enclosing scope of the caller holds the lock");
                })
                .verifyComplete();
        assertThat(called).isFalse();
    }

    @Test
    void lockAtMostForCancelsAnOverrunningJobAndFreesTheLock() {
        AtomicBoolean cancelled = new AtomicBoolean();
        FencedJob job = FencedJob.of(JOB, Duration.ofSeconds(5));
        StepVerifier.create(client.runJob(job, Mono.never().doOnCancel(() -> cancelled.set(true))))
                .then(() -> elapse(5_000))
                .assertNext(outcome -> {
                    assertThat(outcome.status()).isEqualTo(JobOutcome.Status.CUT_OFF);
                    assertThat(outcome.error()).containsInstanceOf(LeaseLostException.class);
                    assertThat(((LeaseLostException) outcome.error().orElseThrow()).reason()).isEqualTo(LossReason.MAX_HOLD_REACHED);
                    assertThat(outcome.token()).isEqualTo(1);
                })
                .verifyComplete();
        assertThat(cancelled).isTrue();
        assertThat(memory.holder(JOB)).isEmpty();
        StepVerifier.create(otherInstance.runJob(job, taking(0)).map(JobOutcome::status)).expectNext(JobOutcome.Status.RAN)
                .verifyComplete();
    }

    @Test
    void aLeaseLostMidRunCancelsTheJob() {
        AtomicBoolean cancelled = new AtomicBoolean();
        StepVerifier.create(client.runJob(CLEANUP, Mono.never().doOnCancel(() -> cancelled.set(true))))
                .then(() -> memory.deleteLock(JOB))
                .then(() -> elapse(1_000))
                .assertNext(outcome -> {
                    assertThat(outcome.status()).isEqualTo(JobOutcome.Status.LOST);
                    assertThat(((LeaseLostException) outcome.error().orElseThrow()).reason()).isEqualTo(LossReason.NOT_HELD);
                })
                .verifyComplete();
        assertThat(cancelled).isTrue();
    }

    @Test
    void aJobThatFailsIsReleasedAtOnce() {
        IllegalStateException boom = new IllegalStateException("boom");
        StepVerifier.create(client.runJob(CLEANUP, taking(500).then(Mono.error(boom))))
                .then(() -> elapse(500))
                .assertNext(outcome -> {
                    assertThat(outcome.status()).isEqualTo(JobOutcome.Status.FAILED);
                    assertThat(outcome.error()).containsSame(boom);
                    assertThat(outcome.reason()).isEqualTo("the job failed: java.lang.IllegalStateException: boom");
                    assertThat(outcome.duration()).isEqualTo(Duration.ofMillis(500));
                })
                .verifyComplete();
        assertThat(memory.holder(JOB)).isEmpty();
    }

    @Test
    void aJobThatFailsKeepsItsLockAtLeastFor() {
        StepVerifier.create(client.runJob(CLEANUP.withLockAtLeastFor(Duration.ofSeconds(4)), Mono.error(new IllegalStateException())))
                .assertNext(outcome -> assertThat(outcome.status()).isEqualTo(JobOutcome.Status.FAILED))
                .verifyComplete();
        assertThat(memory.remainingTime(JOB)).contains(Duration.ofSeconds(4));
    }

    @Test
    void workThatThrowsIsAFailedTick() {
        StepVerifier.create(client.runJob(CLEANUP, () -> {
                    throw new IllegalStateException("no publisher");
                }))
                .assertNext(outcome -> assertThat(outcome.error()).get().extracting(Throwable::getMessage).isEqualTo("no publisher"))
                .verifyComplete();
        assertThat(memory.holder(JOB)).isEmpty();
    }

    @Test
    void aLockServiceThatIsDownSkipsTheTickWithAReasonAndTheNextTickRuns() {
        memory.setUnavailable(true);
        StepVerifier.create(client.runJob(CLEANUP, taking(0)))
                .assertNext(outcome -> {
                    assertThat(outcome.status()).isEqualTo(JobOutcome.Status.UNAVAILABLE);
                    assertThat(outcome.error()).containsInstanceOf(LockServiceException.class);
                    assertThat(outcome.reason()).startsWith("the lock could not be taken: ");
                })
                .verifyComplete();
        memory.setUnavailable(false);
        StepVerifier.create(client.runJob(CLEANUP, taking(0)).map(JobOutcome::status)).expectNext(JobOutcome.Status.RAN)
                .verifyComplete();
    }

    @Test
    void closingTheClientCancelsARunningJobAndReleasesItsLease() {
        AtomicBoolean cancelled = new AtomicBoolean();
        CompletableFuture<JobOutcome> tick = client.runJob(CLEANUP, Mono.never().doOnCancel(() -> cancelled.set(true)))
                .toFuture();

        client.closeLater().block(Duration.ofSeconds(5));

        assertThat(tick.join().status()).isEqualTo(JobOutcome.Status.LOST);
        assertThat(((LeaseLostException) tick.join().error().orElseThrow()).reason()).isEqualTo(LossReason.CLIENT_CLOSED);
        assertThat(cancelled).isTrue();
        assertThat(memory.holder(JOB)).isEmpty();
        StepVerifier.create(client.runJob(CLEANUP, taking(0)))
                .assertNext(outcome -> assertThat(outcome.error()).containsInstanceOf(LockClientClosedException.class))
                .verifyComplete();
    }

    @Test
    void cancellingATickCancelsTheJobAndReleasesTheLockAtOnce() {
        AtomicBoolean cancelled = new AtomicBoolean();
        Disposable tick = client.runJob(CLEANUP.withLockAtLeastFor(Duration.ofSeconds(20)),
                Mono.never().doOnCancel(() -> cancelled.set(true))).subscribe();
        assertThat(memory.holder(JOB)).isPresent();

        tick.dispose();

        assertThat(cancelled).isTrue();
        assertThat(memory.holder(JOB)).isEmpty();
        StepVerifier.create(client.runJob(CLEANUP, taking(0)).map(JobOutcome::status)).expectNext(JobOutcome.Status.RAN)
                .verifyComplete();
    }

    @Test
    void eachTickSubscribesTheJobOnce() {
        AtomicInteger subscriptions = new AtomicInteger();
        Mono<String> job = Mono.fromCallable(() -> "x").doOnSubscribe(s -> subscriptions.incrementAndGet());
        client.runJob(CLEANUP, job).block(Duration.ofSeconds(1));
        client.runJob(CLEANUP, job).block(Duration.ofSeconds(1));
        assertThat(subscriptions).hasValue(2);
    }

    @Test
    void badJobsAreRejected() {
        assertThatThrownBy(() -> FencedJob.of(JOB, Duration.ofSeconds(5)).withLockAtLeastFor(Duration.ofSeconds(6)))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("lockAtLeastFor (PT6S) must not be longer than lockAtMostFor (PT5S) of job 'job:cleanup'");
        assertThatThrownBy(() -> FencedJob.of(JOB, Duration.ofSeconds(5)).withLockAtLeastFor(Duration.ofSeconds(2))
                .withLockAtMostFor(Duration.ofSeconds(1)))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("lockAtLeastFor (PT2S) must not be longer than lockAtMostFor (PT1S) of job 'job:cleanup'");
        assertThatThrownBy(() -> FencedJob.of(" ", Duration.ofSeconds(5)))
                .isInstanceOf(IllegalArgumentException.class).hasMessage("Lock name must not be blank");
        assertThatThrownBy(() -> FencedJob.of(JOB, Duration.ZERO))
                .isInstanceOf(IllegalArgumentException.class).hasMessage("lockAtMostFor must be between 10 ms and 1 day, was PT0S");
        assertThatThrownBy(() -> FencedJob.of(JOB, Duration.ofSeconds(5)).withLockAtLeastFor(Duration.ofSeconds(-1)))
                .isInstanceOf(IllegalArgumentException.class).hasMessage("lockAtLeastFor must be between 0 and 1 day, was PT-1S");
        assertThat(FencedJob.of(JOB, Duration.ofSeconds(5)).withMaxWait(Duration.ofSeconds(1)).acquireOptions())
                .isEqualTo(dev.fenced.lock.AcquireOptions.defaults().withMaxWait(Duration.ofSeconds(1))
                        .withMaxHold(Duration.ofSeconds(5)));
        StepVerifier.create(client.runJob(CLEANUP, (java.util.function.Supplier<Mono<String>>) null))
                .verifyError(NullPointerException.class);
    }

    /** A tick whose lockAtLeastFor tail waits for a renewal in flight when the client closes still emits its outcome. */
    @Test
    void aJobTickInItsTailWhenTheClientIsClosedStillEmitsItsOutcome() {
        FencedJob job = FencedJob.of(JOB, Duration.ofSeconds(30)).withLockAtLeastFor(Duration.ofSeconds(10));
        CompletableFuture<JobOutcome> tick = client.runJob(job, () -> Mono.delay(Duration.ofMillis(1_100), clock)
                .doOnSubscribe(s -> memory.setReplyDelay(Duration.ofMillis(500)))).toFuture();
        elapse(1_100); // the job ends as the renewal sent at 1 s is in flight
        assertThat(tick).as("waits for the renewal").isNotDone();
        CompletableFuture<Void> closed = client.closeLater().toFuture();
        elapse(10_000);

        assertThat(closed).succeedsWithin(Duration.ofSeconds(10));
        assertThat(tick).as("the tick emitted its outcome after the close").isDone();
        assertThat(tick.join().status()).isEqualTo(JobOutcome.Status.RAN);
    }
}
