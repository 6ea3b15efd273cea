package dev.fenced.lock.micrometer;

import dev.fenced.lock.internal.memory.InMemoryLeaseStore;
import static io.micrometer.observation.tck.TestObservationRegistryAssert.assertThat;
import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.LockAcquireTimeoutException;
import dev.fenced.lock.StaleFencingTokenException;
import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.lock.internal.LeasingLockClient;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.micrometer.observation.tck.TestObservationRegistry;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/** Each meter moves after the behaviour that should move it; acquires are observations. */
class MicrometerLockObserverTest {

    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();
    private final InMemoryLeaseStore store = new InMemoryLeaseStore(clock);
    private final SimpleMeterRegistry meters = new SimpleMeterRegistry();
    private final TestObservationRegistry observations = TestObservationRegistry.create();
    private final LeasingLockClient client = LeasingLockClient.create(store,
            ClientSettings.of("m:", Duration.ofSeconds(3), null, Duration.ofSeconds(10), null, clock)
                    .withObserver(MicrometerLockObserver.builder(meters)
                            .observationRegistry(observations)
                            .lockTag(name -> name.substring(0, name.indexOf(':')))
                            .build()));

    @AfterEach
    void tearDown() {
        clock.dispose();
    }

    private double acquires(String outcome) {
        var timer = meters.find("fenced.lock.acquire").tag("outcome", outcome).timer();
        return timer == null ? 0 : timer.count();
    }

    private double counter(String name, String... tags) {
        var counter = meters.find(name).tags(tags).counter();
        return counter == null ? 0 : counter.count();
    }

    @Test
    void acquiresAreTimedByOutcomeAndHeldLeasesAreGauged() {
        FencedLease lease = client.acquire("invoice:1").block();
        StepVerifier.create(client.tryAcquire("invoice:1")).verifyComplete();
        assertThat(acquires("acquired")).isEqualTo(1);
        assertThat(acquires("busy")).isEqualTo(1);
        assertThat(meters.get("fenced.lock.held").gauge().value()).isEqualTo(1);
        assertThat(meters.find("fenced.lock.acquire").tag("lock", "invoice").timers()).hasSize(2);
        lease.release().block();
        assertThat(meters.get("fenced.lock.held").gauge().value()).isZero();
    }

    @Test
    void timeoutsAndFailuresAreCounted() {
        client.acquire("invoice:1").block();
        StepVerifier.create(client.acquire("invoice:1", AcquireOptions.defaults().withMaxWait(Duration.ofSeconds(1))))
                .expectSubscription()
                .then(() -> clock.advanceTimeBy(Duration.ofSeconds(1)))
                .verifyError(LockAcquireTimeoutException.class);
        store.setUnavailable(true);
        StepVerifier.create(client.acquire("invoice:2")).expectError().verify();
        assertThat(acquires("timed_out")).isEqualTo(1);
        assertThat(acquires("failed")).isEqualTo(1);
    }

    @Test
    void renewalsFailuresAndLossesAreCounted() {
        client.acquire("invoice:1").block();
        clock.advanceTimeBy(Duration.ofSeconds(2));
        assertThat(counter("fenced.lock.renewals")).isEqualTo(2);

        store.setUnavailable(true);
        clock.advanceTimeBy(Duration.ofSeconds(3));
        assertThat(counter("fenced.lock.renewal.failures")).isPositive();
        assertThat(counter("fenced.lock.lost", "reason", "expired", "lock", "invoice")).isEqualTo(1);
    }

    @Test
    void rejectedWritesAreCounted() {
        FencedLease lease = client.acquire("invoice:1").block();
        lease.reportRejectedWrite(StaleFencingTokenException.of("invoice:1", "t", lease.token(), lease.token() + 1, "x"));
        assertThat(counter("fenced.lock.write.rejected", "lock", "invoice")).isEqualTo(1);
        assertThat(counter("fenced.lock.lost", "reason", "superseded")).isEqualTo(1);
    }

    @Test
    void acquiresAreObservations() {
        client.acquire("invoice:1").block();
        assertThat(observations)
                .hasObservationWithNameEqualTo("fenced.lock.acquire")
                .that()
                .hasBeenStarted()
                .hasBeenStopped()
                .hasLowCardinalityKeyValue("outcome", "acquired")
                .hasHighCardinalityKeyValue("fenced.lock.name", "invoice:1");
    }

    @Test
    void jobTicksAreTimedByJobAndOutcomeAndObserved() {
        dev.fenced.lock.FencedJob job = dev.fenced.lock.FencedJob.of("report:daily", Duration.ofSeconds(30));
        client.runJob(job, reactor.core.publisher.Mono.just(1)).block();
        FencedLease held = client.acquire("report:daily").block();
        client.runJob(job, reactor.core.publisher.Mono.just(1)).block();
        held.release().block();
        client.runJob(job, reactor.core.publisher.Mono.error(new IllegalStateException("boom"))).block();

        for (String outcome : new String[] {"ran", "skipped", "failed"}) {
            var timer = meters.find("fenced.job").tag("job", "report:daily").tag("outcome", outcome).timer();
            assertThat(timer).as(outcome).isNotNull();
            assertThat(timer.count()).as(outcome).isEqualTo(1);
        }
        client.runJob(job, reactor.core.publisher.Mono.never()).subscribe().dispose();
        var cancelled = meters.find("fenced.job").tag("job", "report:daily").tag("outcome", "cancelled").timer();
        assertThat(cancelled).isNotNull();
        assertThat(cancelled.count()).isEqualTo(1);
        assertThat(observations).hasObservationWithNameEqualTo("fenced.job").that()
                .hasLowCardinalityKeyValue("job", "report:daily");
    }

    @Test
    void forceReleasesAreCountedByOutcomeAndObservedWithTheirReasonAndTheFleetSizeIsGauged() {
        FencedLease lease = client.acquire("job:1").block();
        FencedLease other = client.acquire("job:2").block();
        assertThat(meters.find("fenced.lock.fleet.size").gauge()).as("no view yet: no gauge").isNull();
        StepVerifier.create(client.locks("job:*")).expectNextCount(2).verifyComplete();
        assertThat(meters.get("fenced.lock.fleet.size").gauge().value()).isEqualTo(2);

        StepVerifier.create(client.forceRelease("job:1", "ops: stuck")).expectNextCount(1).verifyComplete();
        StepVerifier.create(client.forceRelease("job:1", "ops: again")).expectNextCount(1).verifyComplete();
        assertThat(counter("fenced.lock.force.released", "outcome", "released", "lock", "job")).isEqualTo(1);
        assertThat(counter("fenced.lock.force.released", "outcome", "not_held", "lock", "job")).isEqualTo(1);
        assertThat(lease.isHeld()).isFalse();
        assertThat(observations).hasObservationWithNameEqualTo("fenced.lock.force.release")
                .that().hasLowCardinalityKeyValue("outcome", "released")
                .hasHighCardinalityKeyValue("fenced.lock.reason", "ops: stuck")
                .hasHighCardinalityKeyValue("fenced.lock.name", "job:1");
        StepVerifier.create(client.locks("job:*")).expectNextCount(1).verifyComplete();
        assertThat(meters.get("fenced.lock.fleet.size").gauge().value()).isEqualTo(1);
        assertThat(other.isHeld()).isTrue(); // kept reachable: a collected lease is released
    }
}
