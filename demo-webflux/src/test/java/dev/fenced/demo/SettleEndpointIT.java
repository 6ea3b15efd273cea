package dev.fenced.demo;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.stream.LongStream;
import org.junit.jupiter.api.Test;
import org.springframework.http.MediaType;

/** The batch endpoint: bounded concurrency, NDJSON progress, every invoice settled exactly once. */
final class SettleEndpointIT extends DemoTestSupport {

    private static final long FIRST = 200_000;
    private static final long LAST = 200_999;

    @Test
    void settlesAThousandInvoicesOnceEachWithBoundedConcurrency() {
        freshInvoices(FIRST, LAST);

        List<SettleProgress> progress = settle();

        assertThat(progress).hasSize(1000);
        assertThat(progress).allSatisfy(p -> {
            assertThat(p.outcome()).isEqualTo("SETTLED");
            assertThat(p.token()).isNotNull();
            assertThat(p.inFlight()).isBetween(1, 16);
        });
        assertThat(progress).extracting(SettleProgress::id)
                .containsExactlyInAnyOrderElementsOf(LongStream.rangeClosed(FIRST, LAST).boxed().toList());
        assertThat(progress).extracting(SettleProgress::done)
                .containsExactlyElementsOf(java.util.stream.IntStream.rangeClosed(1, 1000).boxed().toList());
        int maxInFlight = progress.get(999).maxInFlight();
        assertThat(maxInFlight).as("invoices settled concurrently").isBetween(2, 16);

        Map<String, Object> totals = db.sql("""
                        SELECT count(*) AS rows,
                               count(*) FILTER (WHERE status = 'SETTLED' AND settlements = 1 AND ledger_total = amount) AS once
                        FROM invoices WHERE id BETWEEN :from AND :to""")
                .bind("from", FIRST).bind("to", LAST)
                .fetch().one().block(Duration.ofSeconds(30));
        assertThat(totals).containsEntry("rows", 1000L).containsEntry("once", 1000L);

        // Settling again changes nothing: a retried batch cannot settle an invoice twice.
        assertThat(settle()).extracting(SettleProgress::outcome).containsOnly("ALREADY_SETTLED");
        assertThat(stored(FIRST + 500).settlements()).isEqualTo(1);
    }

    private List<SettleProgress> settle() {
        return webClient().post().uri("/invoices/settle")
                .contentType(MediaType.APPLICATION_JSON)
                .accept(MediaType.APPLICATION_NDJSON)
                .bodyValue(Map.of("from", FIRST, "to", LAST))
                .retrieve()
                .bodyToFlux(SettleProgress.class)
                // A slow reader: the server may only run ahead by what the transport buffers.
                .limitRate(8)
                .collectList()
                .block(Duration.ofSeconds(120));
    }
}
