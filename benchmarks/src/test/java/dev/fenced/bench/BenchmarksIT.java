package dev.fenced.bench;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import org.junit.jupiter.api.Test;

/**
 * Runs the harness in the mode of the {@code bench.mode} property (quick by default, which is what CI runs)
 * and checks that the report is complete and well-formed. It asserts no timing: a benchmark measures.
 */
class BenchmarksIT {

    @Test
    void harnessRunsEveryWorkloadAndWritesAWellFormedReport() throws Exception {
        Benchmarks.Mode mode = Benchmarks.Mode.valueOf(System.getProperty("bench.mode", "quick").toUpperCase(Locale.ROOT));
        Path output = Path.of(System.getProperty("bench.output", "target/benchmarks"));
        String report = Files.readString(Benchmarks.run(mode, output));
        System.out.println(report);

        assertThat(report).contains("## Uncontended acquire + release pairs", "## Contended: 64 workers", "## Held leases");
        assertThat(report.lines().filter(l -> l.matches("\\| (1|64|1024) \\| [0-9]+ \\|.*"))).hasSize(3);
        assertThat(report).doesNotContain("NaN", "Infinity", "| -1 ");
    }
}
