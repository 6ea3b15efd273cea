package dev.fenced.demo;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.groups.Tuple.tuple;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;
import org.junit.jupiter.api.Test;
import org.springframework.core.ParameterizedTypeReference;
import org.springframework.http.MediaType;
import org.springframework.http.codec.ServerSentEvent;

/**
 * The scheduled job on two instances: the scripted replay (an instance paused past lockAtMostFor is cut off, the
 * other runs the next tick, the paused one's late write is refused by PostgreSQL), the live schedule's event stream,
 * and the live stall control.
 */
final class JobEndpointIT extends DemoTestSupport {

    private static final ParameterizedTypeReference<ServerSentEvent<JobEvent>> EVENT =
            new ParameterizedTypeReference<>() { };

    @Test
    void instancePausedPastLockAtMostForIsCutOffAndItsLateWriteIsRefusedByPostgres() {
        JobReplayReport report = client().post().uri("/jobs/replay").exchange()
                .expectStatus().isOk()
                .expectBody(JobReplayReport.class).returnResult().getResponseBody();

        assertThat(report).isNotNull();
        assertThat(report.lockAtMostForMs()).isEqualTo(2000);
        List<JobEvent> events = report.events();
        assertThat(events).extracting(JobEvent::seq).isSorted();
        assertThat(events).filteredOn(e -> isOutcome(e.kind()))
                .extracting(JobEvent::tick, JobEvent::instance, JobEvent::kind)
                .containsExactlyInAnyOrder(
                        tuple(1, "instance-1", "ran"), tuple(1, "instance-2", "skipped"),
                        tuple(2, "instance-1", "cut-off"), tuple(2, "instance-2", "skipped"),
                        tuple(3, "instance-2", "ran"));
        assertThat(events).filteredOn(e -> e.kind().startsWith("write-"))
                .extracting(JobEvent::tick, JobEvent::instance, JobEvent::kind)
                .containsExactly(
                        tuple(1, "instance-1", "write-accepted"),
                        tuple(3, "instance-2", "write-accepted"),
                        tuple(2, "instance-1", "write-refused"));
        // The pause came before the cut-off, the refusal after the other instance's write and the resumption.
        assertThat(events).extracting(JobEvent::instance, JobEvent::kind).containsSubsequence(
                tuple("instance-1", "paused"), tuple("instance-1", "cut-off"), tuple("instance-2", "write-accepted"),
                tuple("instance-1", "resumed"), tuple("instance-1", "write-refused"));

        assertThat(report.nextToken()).isGreaterThan(report.stalledToken());
        assertThat(report.lateWriteRefused()).isTrue();
        assertThat(report.refusal()).contains("token " + report.stalledToken() + " is older than the stored token "
                + report.nextToken());
        JobEvent refused = events.stream().filter(e -> e.kind().equals("write-refused")).findFirst().orElseThrow();
        assertThat(refused.token()).isEqualTo(report.stalledToken());
        assertThat(refused.outcome()).isEqualTo("rejected");

        assertThat(report.finalRow()).isEqualTo(new JobReportRow(report.job(), 3, "instance-2", report.nextToken()));
    }

    @Test
    void liveScheduleRunsEachTickOnOneInstanceAndSkipsItOnTheOther() {
        List<JobEvent> seen = new ArrayList<>();
        webClient().get().uri("/jobs/events").accept(MediaType.TEXT_EVENT_STREAM).retrieve().bodyToFlux(EVENT)
                .map(ServerSentEvent::data)
                .doOnNext(seen::add)
                .takeUntil(e -> oneRanTheOtherSkipped(seen))
                .then()
                .block(Duration.ofSeconds(60));

        JobEvent ran = seen.stream().filter(e -> e.kind().equals("ran") && oneRanTheOtherSkipped(seen, e.tick()))
                .findFirst().orElseThrow();
        assertThat(ran.job()).isEqualTo(JobService.LIVE_JOB);
        assertThat(ran.token()).isPositive();
        assertThat(seen).filteredOn(e -> e.tick() == ran.tick() && e.kind().equals("write-accepted"))
                .extracting(JobEvent::instance, JobEvent::token)
                .contains(tuple(ran.instance(), ran.token()));
    }

    @Test
    void stallingTheLiveScheduleCutsTheRunnerOffAndRefusesItsLateWrite() {
        List<JobEvent> before = client().get().uri("/jobs/events?after=0").accept(MediaType.APPLICATION_JSON)
                .exchange().expectStatus().isOk().expectBodyList(JobEvent.class).returnResult().getResponseBody();
        long after = before == null || before.isEmpty() ? 0 : before.get(before.size() - 1).seq();

        JobStall armed = client().post().uri("/jobs/stall").exchange().expectStatus().isOk()
                .expectBody(JobStall.class).returnResult().getResponseBody();
        assertThat(armed).isNotNull();
        assertThat(armed.armed()).isTrue();
        assertThat(armed.after()).isGreaterThanOrEqualTo(after);
        assertThat(armed.events()).isEmpty();
        // A second stall while the first one waits is refused.
        client().post().uri("/jobs/stall").exchange().expectStatus().isEqualTo(409)
                .expectBody().jsonPath("$.armed").isEqualTo(false);

        List<JobEvent> seen = new ArrayList<>();
        webClient().get().uri("/jobs/events").accept(MediaType.TEXT_EVENT_STREAM).retrieve().bodyToFlux(EVENT)
                .map(ServerSentEvent::data)
                .filter(e -> e.seq() > after)
                .doOnNext(seen::add)
                .takeUntil(e -> e.kind().equals("write-refused"))
                .then()
                .block(Duration.ofSeconds(60));

        JobEvent paused = only(seen, e -> e.kind().equals("paused"));
        JobEvent refused = only(seen, e -> e.kind().equals("write-refused"));
        assertThat(refused.instance()).isEqualTo(paused.instance());
        assertThat(refused.tick()).isEqualTo(paused.tick());
        assertThat(seen).filteredOn(e -> e.instance().equals(paused.instance()) && e.tick() == paused.tick())
                .extracting(JobEvent::kind).contains("cut-off");
        // The other instance ran a later tick with a higher token, and was accepted, before the refusal.
        JobEvent next = seen.stream().filter(e -> e.kind().equals("write-accepted") && e.tick() > paused.tick()
                && !e.instance().equals(paused.instance())).findFirst().orElseThrow();
        assertThat(next.token()).isGreaterThan(refused.token());
        assertThat(next.seq()).isLessThan(refused.seq());
        assertThat(seen).filteredOn(e -> e.tick() > paused.tick() && e.instance().equals(paused.instance())
                && isOutcome(e.kind()) && e.seq() < next.seq()).isEmpty();
    }

    @Test
    void stallThatWaitsAnswersWithTheEventsUpToTheRefusedLateWrite() {
        JobStall stall = client().post().uri("/jobs/stall?wait=true").exchange()
                .expectStatus().isOk()
                .expectBody(JobStall.class).returnResult().getResponseBody();

        assertThat(stall).isNotNull();
        assertThat(stall.armed()).isTrue();
        JobEvent paused = only(stall.events(), e -> e.kind().equals("paused"));
        JobEvent refused = only(stall.events(), e -> e.kind().equals("write-refused"));
        assertThat(refused.instance()).isEqualTo(paused.instance());
        assertThat(stall.events()).extracting(JobEvent::seq).isSorted().allMatch(seq -> seq > stall.after());
        assertThat(stall.events()).filteredOn(e -> e.kind().equals("write-accepted") && e.seq() > paused.seq())
                .extracting(JobEvent::instance).isNotEmpty().doesNotContain(paused.instance());
    }

    private static boolean isOutcome(String kind) {
        return List.of("ran", "skipped", "failed", "lost", "cut-off", "unavailable").contains(kind);
    }

    private static boolean oneRanTheOtherSkipped(List<JobEvent> seen) {
        return seen.stream().anyMatch(e -> e.kind().equals("ran") && oneRanTheOtherSkipped(seen, e.tick()));
    }

    private static boolean oneRanTheOtherSkipped(List<JobEvent> seen, int tick) {
        List<JobEvent> outcomes = seen.stream().filter(e -> e.tick() == tick && isOutcome(e.kind())
                && e.job().equals(JobService.LIVE_JOB)).toList();
        return outcomes.size() == 2 && outcomes.stream().anyMatch(e -> e.kind().equals("ran"))
                && outcomes.stream().anyMatch(e -> e.kind().equals("skipped"))
                && !outcomes.get(0).instance().equals(outcomes.get(1).instance());
    }

    private static JobEvent only(List<JobEvent> events, Predicate<JobEvent> which) {
        List<JobEvent> found = events.stream().filter(which).toList();
        assertThat(found).as("in " + events).hasSize(1);
        return found.get(0);
    }
}
