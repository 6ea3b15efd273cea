package dev.fenced.demo;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.ForceReleaseResult;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.core.ParameterizedTypeReference;
import org.springframework.http.MediaType;
import org.springframework.http.codec.ServerSentEvent;

/**
 * The locks panel's endpoints: the fleet view streamed every 500 ms (holder label, token, remaining time), and
 * "break this lock" on the stuck worker A of the scenario, after which B gets a higher token and A's late write is
 * refused by PostgreSQL.
 */
final class LocksEndpointIT extends DemoTestSupport {

    private static final ParameterizedTypeReference<ServerSentEvent<LocksSnapshot>> SNAPSHOT =
            new ParameterizedTypeReference<>() { };

    @Autowired
    FencedLockClient locks;

    @Test
    void streamShowsAHeldLockWithItsHolderTokenAndRemainingTimeUntilItIsReleased() {
        String name = "locks-it:" + System.nanoTime();
        FencedLease lease = locks.acquire(name, dev.fenced.lock.AcquireOptions.defaults()
                .withLeaseTime(Duration.ofSeconds(20))).block(Duration.ofSeconds(10));
        assertThat(lease).isNotNull();
        try {
            LockRow row = firstRow(r -> r.name().equals(name));
            assertThat(row.token()).isEqualTo(lease.token());
            assertThat(row.remainingMs()).isPositive().isLessThanOrEqualTo(20_000);
            assertThat(row.holderLabel()).isNotBlank();
            assertThat(row.waiters()).isZero();
            assertThat(row.stalled()).isFalse();
            // The starter's read-only Actuator endpoint shows the same lock.
            client().get().uri("/actuator/fencedlocks?pattern={name}", name).exchange()
                    .expectStatus().isOk()
                    .expectBody()
                    .jsonPath("$.locks[0].name").isEqualTo(name)
                    .jsonPath("$.locks[0].token").isEqualTo(lease.token())
                    .jsonPath("$.locks[0].holderLabel").isEqualTo(row.holderLabel());
        } finally {
            lease.release().block(Duration.ofSeconds(10));
        }
        // Released: a later snapshot no longer lists it.
        LocksSnapshot after = client().get().uri("/locks").exchange().expectStatus().isOk()
                .expectBody(LocksSnapshot.class).returnResult().getResponseBody();
        assertThat(after).isNotNull();
        assertThat(after.error()).isNull();
        assertThat(after.locks()).extracting(LockRow::name).doesNotContain(name);
    }

    @Test
    void breakingTheStuckWorkersLockLetsBWriteWithAHigherTokenAndRefusesAsLateWrite() throws Exception {
        CompletableFuture<ScenarioReport> running = webClient().post().uri("/scenario/replay-stuck").retrieve()
                .bodyToMono(ScenarioReport.class).toFuture();

        // Worker A is paused holding the lock, B waits on the application's client: the view shows both.
        LockRow stuck = firstRow(r -> r.stalled() && ScenarioService.WORKER_A_LABEL.equals(r.holderLabel())
                && r.waiters() == 1);
        assertThat(stuck.name()).startsWith("invoice:");

        ForceReleaseResult broken = client().post().uri("/locks/force-release")
                .bodyValue(new ForceReleaseRequest(stuck.name(), "LocksEndpointIT: worker A is stuck"))
                .exchange().expectStatus().isOk()
                .expectBody(ForceReleaseResult.class).returnResult().getResponseBody();
        assertThat(broken).isNotNull();
        assertThat(broken.outcome()).isEqualTo(ForceReleaseResult.Outcome.RELEASED);
        assertThat(broken.token()).isEqualTo(stuck.token());
        assertThat(broken.holderLabel()).isEqualTo(ScenarioService.WORKER_A_LABEL);

        ScenarioReport report = running.get(60, TimeUnit.SECONDS);
        assertThat(report.fencing()).isTrue();
        assertThat(report.lockName()).isEqualTo(stuck.name());
        assertThat(report.tokenA()).isEqualTo(stuck.token());
        assertThat(report.tokenB()).isGreaterThan(report.tokenA());
        assertThat(report.workerARejected()).isTrue();
        assertThat(report.workerBDataKept()).isTrue();
        assertThat(report.rejection()).contains("with fencing token " + report.tokenA());
        assertThat(report.events()).extracting(ScenarioEvent::lane, ScenarioEvent::kind, ScenarioEvent::token)
                .containsSubsequence(
                        org.assertj.core.groups.Tuple.tuple("worker-a", "paused", report.tokenA()),
                        org.assertj.core.groups.Tuple.tuple("lock-service", "force-released", report.tokenA()),
                        org.assertj.core.groups.Tuple.tuple("lock-service", "granted", report.tokenB()),
                        org.assertj.core.groups.Tuple.tuple("database", "rejected", report.tokenA()));
        Invoice stored = stored(report.invoiceId());
        assertThat(stored.processedBy()).isEqualTo("worker-b");
        assertThat(stored.fencingToken()).isEqualTo(report.tokenB());

        // Breaking it again changes nothing.
        client().post().uri("/locks/force-release")
                .bodyValue(new ForceReleaseRequest(stuck.name(), "LocksEndpointIT: again"))
                .exchange().expectStatus().isOk()
                .expectBody().jsonPath("$.outcome").isEqualTo("NOT_HELD");
    }

    @Test
    void stuckRunStartedInTheBackgroundIsRunningUntilItsLockIsBrokenThenAnswersItsReport() {
        Map<?, ?> started = client().post().uri("/scenario/stuck-runs").exchange()
                .expectStatus().isAccepted()
                .expectBody(Map.class).returnResult().getResponseBody();
        assertThat(started).isNotNull();
        Object id = started.get("id");

        LockRow stuck = firstRow(r -> r.stalled() && r.waiters() == 1);
        client().get().uri("/scenario/stuck-runs/{id}", id).exchange()
                .expectStatus().isAccepted()
                .expectBody().jsonPath("$.state").isEqualTo("running");

        client().post().uri("/locks/force-release")
                .bodyValue(new ForceReleaseRequest(stuck.name(), "LocksEndpointIT: stuck run"))
                .exchange().expectStatus().isOk()
                .expectBody().jsonPath("$.outcome").isEqualTo("RELEASED");

        ScenarioReport report = client().get().uri("/scenario/stuck-runs/{id}?wait=true", id).exchange()
                .expectStatus().isOk()
                .expectBody(ScenarioReport.class).returnResult().getResponseBody();
        assertThat(report).isNotNull();
        assertThat(report.lockName()).isEqualTo(stuck.name());
        assertThat(report.workerARejected()).isTrue();
        assertThat(report.workerBDataKept()).isTrue();
        assertThat(report.events()).extracting(ScenarioEvent::kind).contains("force-released");

        client().get().uri("/scenario/stuck-runs/{id}", "no-such-run").exchange().expectStatus().isNotFound();
    }

    @Test
    void forceReleaseWithoutAReasonIsABadRequest() {
        client().post().uri("/locks/force-release")
                .bodyValue(Map.of("name", "locks-it:no-reason", "reason", " "))
                .exchange().expectStatus().isBadRequest();
    }

    /** Reads the stream until a snapshot has a row matching {@code which}. */
    private LockRow firstRow(Predicate<LockRow> which) {
        Optional<LockRow> row = webClient().get().uri("/locks/stream").accept(MediaType.TEXT_EVENT_STREAM).retrieve()
                .bodyToFlux(SNAPSHOT)
                .map(ServerSentEvent::data)
                .concatMapIterable(LocksSnapshot::locks)
                .filter(which)
                .next()
                .blockOptional(Duration.ofSeconds(30));
        assertThat(row).as("a lock matching the condition in the stream").isPresent();
        return row.get();
    }
}
