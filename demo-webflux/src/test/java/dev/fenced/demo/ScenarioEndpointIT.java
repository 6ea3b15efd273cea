package dev.fenced.demo;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * The replayed scenario: with fencing, the paused holder's late write is rejected by PostgreSQL and the new holder's
 * kept; without fencing (a plain TTL lock and an unguarded write), the late write overwrites the new holder's.
 */
final class ScenarioEndpointIT extends DemoTestSupport {

    @Test
    void pausedHolderIsRejectedAndTheNewHoldersWriteIsKept() {
        ScenarioReport report = client().post().uri("/scenario/replay").exchange()
                .expectStatus().isOk()
                .expectBody(ScenarioReport.class).returnResult().getResponseBody();

        assertThat(report).isNotNull();
        assertThat(report.fencing()).isTrue();
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
                .filter(e -> e.lane().equals("lock-service") && report.tokenB().equals(e.token())).findFirst()
                .orElseThrow();
        assertThat(sent.offsetMs()).isLessThanOrEqualTo(grantedB.offsetMs());
    }

    @Test
    void withoutFencingThePausedHoldersLateWriteOverwritesTheNewHolders() {
        ScenarioReport report = client().post().uri("/scenario/replay-without-fencing").exchange()
                .expectStatus().isOk()
                .expectBody(ScenarioReport.class).returnResult().getResponseBody();

        assertThat(report).isNotNull();
        assertThat(report.fencing()).isFalse();
        assertThat(report.tokenA()).isNull();
        assertThat(report.tokenB()).isNull();
        assertThat(report.workerARejected()).isFalse();
        assertThat(report.workerBDataKept()).isFalse();
        assertThat(report.rejection()).isNull();

        // Both read the invoice before either wrote; A's write came last and replaced B's.
        Invoice stored = stored(report.invoiceId());
        assertThat(stored.processedBy()).isEqualTo("worker-a");
        assertThat(stored.timesProcessed()).isEqualTo(1);
        assertThat(stored.ledgerTotal()).isEqualTo(stored.amount());
        assertThat(stored.fencingToken()).isNull();
        assertThat(report.finalInvoice()).isEqualTo(stored);

        assertThat(report.events()).extracting(ScenarioEvent::offsetMs).isSorted();
        assertThat(report.events())
                .filteredOn(e -> e.lane().equals("database"))
                .extracting(ScenarioEvent::kind, ScenarioEvent::outcome)
                .containsExactly(
                        org.assertj.core.groups.Tuple.tuple("accepted", "ok"),
                        org.assertj.core.groups.Tuple.tuple("accepted", "stale"),
                        org.assertj.core.groups.Tuple.tuple("final", "info"));
        assertThat(report.events()).filteredOn(e -> e.lane().equals("lock-service")).hasSize(2)
                .allSatisfy(e -> assertThat(e.token()).isNull());
        ScenarioEvent sent = event(report, "worker-a", "write-sent");
        ScenarioEvent wroteB = event(report, "worker-b", "wrote");
        assertThat(sent.offsetMs()).isLessThanOrEqualTo(wroteB.offsetMs());
        assertThat(event(report, "worker-a", "wrote").offsetMs()).isGreaterThanOrEqualTo(wroteB.offsetMs());
    }

    private static ScenarioEvent event(ScenarioReport report, String lane, String kind) {
        return report.events().stream().filter(e -> e.lane().equals(lane) && e.kind().equals(kind)).findFirst()
                .orElseThrow(() -> new AssertionError("no event " + lane + "/" + kind + " in " + report.events()));
    }
}
