package dev.fenced.bench;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import org.junit.jupiter.api.Test;

/**
 * Runs the harness in the mode of the {@code bench.mode} property (quick by default, which is what CI runs)
 * and checks that the report is complete and well-formed: every workload, every peer, every ratio and every
 * target has a number. It asserts no timing: a benchmark measures.
 */
class BenchmarksIT {

    private static final String NUMBER = "[0-9]+(\\.[0-9]+)?";

    @Test
    void harnessRunsEveryWorkloadAndWritesAWellFormedReport() throws Exception {
        Benchmarks.Mode mode = Benchmarks.Mode.valueOf(System.getProperty("bench.mode", "quick").toUpperCase(Locale.ROOT));
        Path output = Path.of(System.getProperty("bench.output", "target/benchmarks"));
        String report = Files.readString(Benchmarks.run(mode, output));
        System.out.println(report);

        assertThat(report).contains("## Uncontended acquire + release pairs", "## Contended: 64 workers", "## Held leases",
                "## Storage: PostgreSQL over R2DBC", "## Against the targets of the benchmark issue");
        // Five peers' pairs/s, then Fenced / each of the other four, at each in-flight count.
        assertThat(report.lines().filter(l -> l.matches("\\| (1|64|1024) \\|( " + NUMBER + " \\|){9}"))).hasSize(3);
        // CPU per pair (client / Redis), then latency (p50 / p99), of the five peers at each in-flight count.
        assertThat(report).contains("CPU time per pair in µs");
        assertThat(report.lines().filter(l -> l.matches("\\| (1|64|1024) \\|( " + NUMBER + " / " + NUMBER + " \\|){5}")))
                .hasSize(6);
        // A fixed name per worker: Fenced and the two bare locks, pairs/s and Fenced / each bare one, then CPU and latency.
        assertThat(report).contains("## Uncontended acquire + release pairs (a fixed name per worker)");
        assertThat(report.lines().filter(l -> l.matches("\\| (1|64|1024) \\|( " + NUMBER + " \\|){5}"))).hasSize(3);
        assertThat(report.lines().filter(l -> l.matches("\\| (1|64|1024) \\|( " + NUMBER + " / " + NUMBER + " \\|){3}")))
                .hasSize(6);
        // Fenced on PostgreSQL: pairs/s, p50, p99 and the ratio to Fenced on Redis, at 1 and 64 in flight.
        assertThat(report).contains("## Fenced on PostgreSQL: uncontended acquire + release pairs");
        assertThat(report.lines().filter(l -> l.matches("\\| (1|64) \\|( " + NUMBER + " \\|){4}"))).hasSize(2);
        for (String lock : new String[] {"Fenced", "Redisson RLock", "Redisson RFencedLock", "Fenced on PostgreSQL"}) {
            assertThat(report.lines().filter(l -> l.matches("\\| " + lock + " \\|( " + NUMBER + " \\|){8}")))
                    .as("contended row of %s", lock).hasSize(1);
        }
        for (String lock : new String[] {"Fenced", "Redisson RLock", "Fenced on PostgreSQL"}) {
            assertThat(report.lines().filter(l -> l.matches("\\| " + lock + " \\|( -?" + NUMBER + " \\|){5}")))
                    .as("held row of %s", lock).hasSize(1);
        }
        assertThat(report).contains("## Scheduled-job ticks: one job, one tick after another");
        for (String lock : new String[] {"Fenced job \\(runJob\\)", "Fenced \\(FencedLockProvider\\)",
                "ShedLock RedisLockProvider"}) {
            assertThat(report.lines().filter(l -> l.matches("\\| " + lock + " \\|( " + NUMBER + " \\|){7}")))
                    .as("ticks row of %s", lock).hasSize(1);
        }
        for (String lock : new String[] {"Fenced job \\(runJob\\)", "Fenced \\(FencedLockProvider\\)"}) {
            assertThat(report).containsPattern(lock + " / ShedLock RedisLockProvider time per tick: \\*\\*" + NUMBER
                    + "\\*\\*; requests per tick: \\*\\*" + NUMBER + "\\*\\*; commands per tick: \\*\\*" + NUMBER
                    + "\\*\\*");
        }
        for (String kind : new String[] {"plain UPDATE", "fenced UPDATE", "batch without locks",
                "batch, acquire \\+ fenced write \\+ release"}) {
            assertThat(report.lines().filter(l -> l.matches("\\| " + kind + " \\|( " + NUMBER + " \\|){4}")))
                    .as("storage row %s", kind).hasSize(1);
        }
        assertThat(report).contains("## Fleet view: listing every held lock under one prefix");
        for (String store : new String[] {"Redis", "PostgreSQL"}) {
            assertThat(report.lines().filter(l -> l.matches("\\| " + store + " \\|( " + NUMBER + " \\|){3}")))
                    .as("fleet view row of %s", store).hasSize(1);
        }
        assertThat(report)
                .containsPattern("Fenced / Redisson RLock handoffs/s: \\*\\*" + NUMBER + "\\*\\*")
                .containsPattern("Fenced / Redisson RFencedLock handoffs/s: \\*\\*" + NUMBER + "\\*\\*")
                .containsPattern("Fenced UPDATE / plain UPDATE: \\*\\*" + NUMBER
                        + "\\*\\*; locked batch / unlocked batch: \\*\\*" + NUMBER + "\\*\\*");
        // Every target of the issue has a verdict (the limit's only when redis-benchmark is installed).
        assertThat(report.lines().filter(l -> l.matches("\\| .+ \\| .+ \\| (met|missed) \\|"))).hasSizeGreaterThanOrEqualTo(12);
        assertThat(report).doesNotContain("NaN", "Infinity", "| -1 ", " -1 /");
    }
}
