package dev.fenced.torture;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

/** The per-scenario summary table, as Markdown: printed and written under {@code target/}. Thread-safe. */
final class Report {

    private final List<Checker.Result> results = new ArrayList<>();
    private final java.util.Map<Checker.Result, Run.Orphans> orphans = new java.util.IdentityHashMap<>();
    private final List<String> notes = new ArrayList<>();
    private final long startedAt = System.nanoTime();

    synchronized void add(Checker.Result result) {
        results.add(result);
    }

    /** Adds a run's result with the locks it left held by nobody (the orphan-lease column). */
    synchronized void add(Run.Outcome outcome) {
        add(outcome.result());
        orphans.put(outcome.result(), outcome.orphans());
    }

    /** Adds a line to the notes under the table: what a scenario counted beyond the checker's columns. */
    synchronized void note(String line) {
        notes.add(line);
    }

    /** The notes, as a Markdown list; empty if there are none. */
    synchronized String notes() {
        StringBuilder out = new StringBuilder();
        notes.forEach(line -> out.append("- ").append(line).append('\n'));
        return out.toString();
    }

    synchronized String table() {
        StringBuilder out = new StringBuilder();
        out.append("| scenario | arm | ops | accepted | stale-rejected | lost | unknown | acquire failed | lost signals "
                + "| I1 | I2 | I3 | I4 | I5 | I6 | I7 | M1 | M2 | orphan leases | loss latency p50 | p99 | verdict |\n");
        out.append("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n");
        for (Checker.Result r : results) {
            boolean flagged = r.violations() > 0;
            String verdict = r.arm().isControl()
                    ? (flagged ? "flagged, as it must be" : "NOT FLAGGED")
                    : (flagged ? "VIOLATED" : "ok");
            out.append("| ").append(r.scenario()).append(" | ").append(r.arm().label())
                    .append(" | ").append(r.operations()).append(" | ").append(r.accepted())
                    .append(" | ").append(r.staleRejected()).append(" | ").append(r.lost())
                    .append(" | ").append(r.unknown()).append(" | ").append(r.acquireFailures())
                    .append(" | ").append(r.noLossSignals() ? "n/a" : Integer.toString(r.lossSignals()))
                    .append(" | ").append(r.i1()).append(" | ").append(r.i2()).append(" | ").append(r.i3())
                    .append(" | ").append(r.i4()).append(" | ").append(r.noLossSignals() ? "n/a" : Integer.toString(r.i5()))
                    .append(" | ").append(r.i6())
                    .append(" | ").append(r.setChecked() ? Integer.toString(r.i7()) : "n/a")
                    .append(" | ").append(r.mutex() == Checker.Mutex.NONE ? "n/a" : Integer.toString(r.m1()))
                    .append(" | ").append(switch (r.mutex()) {
                        case NONE -> "n/a";
                        case FULL -> Integer.toString(r.m2());
                        case TOKEN_ORDER_ONLY -> r.m2() + " (not expected to hold here)";
                    })
                    .append(" | ").append(orphans.getOrDefault(r, Run.Orphans.UNKNOWN).describe())
                    .append(" | ").append(millis(r.lossP50Nanos())).append(" | ").append(millis(r.lossP99Nanos()))
                    .append(" | ").append(verdict).append(" |\n");
        }
        return out.toString();
    }

    private static String millis(long nanos) {
        return nanos == Long.MIN_VALUE ? "-" : String.format("%+d ms", Math.round(nanos / 1e6));
    }

    /** Writes {@code torture-report.md} in {@code directory}; returns the file. */
    synchronized Path write(Path directory) {
        String text = "# Torture report\n\n" + "Run finished " + Instant.now() + " after "
                + Duration.ofNanos(System.nanoTime() - startedAt).toSeconds() + " s.\n\n" + table()
                + "\nLoss latency: when a lease's loss signal fired, relative to its local validity deadline (or the end "
                + "of the holder's freeze); negative means before the deadline (the lock service said the lease was gone, or "
                + "Redis answered as another server). "
                + "I5 bound: " + Checker.LOSS_SIGNAL_BOUND.toMillis() + " ms. Orphan leases: locks of the run still held in the "
                + "lock service once every client of the run was closed, so held by nobody, with the longest time one had "
                + "left.\n\n" + (notes.isEmpty() ? "" : "Scenario counts:\n\n" + notes() + "\n") + examples();
        try {
            Files.createDirectories(directory);
            Path file = directory.resolve("torture-report.md");
            Files.writeString(file, text, StandardCharsets.UTF_8);
            return file;
        } catch (IOException e) {
            throw new UncheckedIOException("Could not write the torture report to " + directory, e);
        }
    }

    private String examples() {
        StringBuilder out = new StringBuilder();
        for (Checker.Result r : results) {
            if (!r.examples().isEmpty()) {
                out.append("## Notes and violations: ").append(r.scenario()).append(" (").append(r.arm().label()).append(")\n\n");
                r.examples().forEach(e -> out.append("- ").append(e).append('\n'));
                out.append('\n');
            }
        }
        return out.toString();
    }
}
