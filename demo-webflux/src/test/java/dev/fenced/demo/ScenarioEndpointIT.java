package dev.fenced.demo;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The replayed scenario: the paused holder's late write is rejected by PostgreSQL, the new holder's kept. */
final class ScenarioEndpointIT extends DemoTestSupport {

    @Test
    void pausedHolderIsRejectedAndTheNewHoldersWriteIsKept() {
        ScenarioReport report = client().post().uri("/scenario/replay").exchange()
                .expectStatus().isOk()
                .expectBody(ScenarioReport.class).returnResult().getResponseBody();

        assertThat(report).isNotNull();
        assertThat(report.workerARejected()).isTrue();
        assertThat(report.workerBDataKept()).isTrue();
        assertThat(report.tokenB()).isGreaterThan(report.tokenA());
        assertThat(report.rejection()).contains("with fencing token " + report.tokenA());

        Invoice stored = stored(report.invoiceId());
        assertThat(stored.processedBy()).isEqualTo("worker-b");
        assertThat(stored.fencingToken()).isEqualTo(report.tokenB());
        assertThat(stored.timesProcessed()).isEqualTo(1);

        assertThat(report.events()).extracting(ScenarioEvent::lane)
                .contains("lock-service", "worker-a", "worker-b", "database");
        assertThat(report.events()).extracting(ScenarioEvent::offsetMs).isSorted();
        assertThat(report.events())
                .filteredOn(e -> e.lane().equals("database"))
                .extracting(ScenarioEvent::kind, ScenarioEvent::token, ScenarioEvent::outcome)
                .containsSubsequence(
                        org.assertj.core.groups.Tuple.tuple("accepted", report.tokenB(), "ok"),
                        org.assertj.core.groups.Tuple.tuple("rejected", report.tokenA(), "rejected"));
        assertThat(report.events())
                .filteredOn(e -> e.lane().equals("lock-service"))
                .extracting(ScenarioEvent::token)
                .containsExactly(report.tokenA(), report.tokenB());
        // A's write was sent while its lease was valid, before B was granted the lock.
        ScenarioEvent sent = event(report, "worker-a", "write-sent");
        ScenarioEvent grantedB = report.events().stream()
                .filter(e -> e.lane().equals("lock-service") && report.tokenB() == e.token()).findFirst().orElseThrow();
        assertThat(sent.offsetMs()).isLessThanOrEqualTo(grantedB.offsetMs());
    }

    private static ScenarioEvent event(ScenarioReport report, String lane, String kind) {
        return report.events().stream().filter(e -> e.lane().equals(lane) && e.kind().equals(kind)).findFirst()
                .orElseThrow(() -> new AssertionError("no event " + lane + "/" + kind + " in " + report.events()));
    }
}
