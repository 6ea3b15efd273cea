package dev.fenced.bench;

import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/** Collects results and renders them as a Markdown report with the machine, the settings and ratios. */
final class Report {

    /** {@code redis-benchmark} rates of the bare lock's scripts, one connection. */
    record Limit(double acquirePerSecond, double releasePerSecond, double acquirePipelined16PerSecond) {

        /** Acquire+release pairs per second one connection can do without pipelining. */
        double pairsPerSecond() {
            return acquirePerSecond <= 0 || releasePerSecond <= 0 ? -1 : 1 / (1 / acquirePerSecond + 1 / releasePerSecond);
        }
    }

    private final String mode;
    private final String redisUri;
    private String redisVersion = "unknown";
    private final List<Workloads.Uncontended[]> uncontended = new ArrayList<>();
    private Limit limit = new Limit(-1, -1, -1);
    private Workloads.Contended contended;
    private Workloads.Held held;

    Report(String mode, String redisUri) {
        this.mode = mode;
        this.redisUri = redisUri;
    }

    void redisVersion(String version) {
        this.redisVersion = version;
    }

    void uncontended(Workloads.Uncontended fenced, Workloads.Uncontended bare) {
        uncontended.add(new Workloads.Uncontended[] {fenced, bare});
    }

    void limit(Limit value) {
        this.limit = value;
    }

    void contended(Workloads.Contended value) {
        this.contended = value;
    }

    void held(Workloads.Held value) {
        this.held = value;
    }

    String render() {
        StringBuilder out = new StringBuilder();
        Runtime rt = Runtime.getRuntime();
        out.append("# Fenced benchmarks (").append(mode).append(" mode)\n\n");
        out.append("- when: ").append(Instant.now()).append('\n');
        out.append("- machine: ").append(rt.availableProcessors()).append(" cores, ")
                .append(System.getProperty("os.name")).append(' ').append(System.getProperty("os.arch"))
                .append(", max heap ").append(rt.maxMemory() / (1024 * 1024)).append(" MiB\n");
        out.append("- JVM: ").append(System.getProperty("java.vm.name")).append(' ').append(System.getProperty("java.version")).append('\n');
        out.append("- Redis ").append(redisVersion).append(" at ").append(redisUri).append(", same machine\n");
        out.append("- Fenced with default settings (lease 30 s, renewal 10 s); one Lettuce connection per client\n\n");

        out.append("## Uncontended acquire + release pairs (distinct names)\n\n");
        out.append("| in flight | Fenced pairs/s | p50 µs | p99 µs | bare Lettuce pairs/s | p50 µs | p99 µs | Fenced / bare |\n");
        out.append("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (Workloads.Uncontended[] row : uncontended) {
            Workloads.Uncontended f = row[0];
            Workloads.Uncontended b = row[1];
            out.append(String.format(Locale.ROOT, "| %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.2f |%n", f.inFlight(),
                    f.pairsPerSecond(), f.p50Micros(), f.p99Micros(), b.pairsPerSecond(), b.p50Micros(), b.p99Micros(),
                    f.pairsPerSecond() / b.pairsPerSecond()));
        }

        out.append("\n## The Redis limit (redis-benchmark, same scripts, one connection)\n\n");
        if (limit.pairsPerSecond() < 0) {
            out.append("redis-benchmark is not installed: no limit measured.\n");
        } else {
            out.append(String.format(Locale.ROOT, "| acquire script /s | release script /s | pair limit /s | acquire, pipelined x16 /s |%n"
                    + "|---:|---:|---:|---:|%n| %.0f | %.0f | %.0f | %.0f |%n", limit.acquirePerSecond(), limit.releasePerSecond(),
                    limit.pairsPerSecond(), limit.acquirePipelined16PerSecond()));
            if (!uncontended.isEmpty()) {
                out.append(String.format(Locale.ROOT, "%nFenced at 1 in flight / pair limit: **%.2f**%n",
                        uncontended.get(0)[0].pairsPerSecond() / limit.pairsPerSecond()));
            }
        }

        if (contended != null) {
            out.append("\n## Contended: ").append(contended.workers()).append(" workers, one lock name, one client\n\n");
            out.append("| seconds | acquisitions | owner-changing handoffs/s | requests per acquire | commands per acquire "
                    + "(incl. inside scripts) | share changing owner | wait p50 µs | wait p99 µs |\n");
            out.append("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
            out.append(String.format(Locale.ROOT, "| %.1f | %d | %.0f | %.2f | %.2f | %.2f | %.0f | %.0f |%n", contended.seconds(),
                    contended.acquisitions(), contended.handoffsPerSecond(), contended.requestsPerAcquire(),
                    contended.commandsPerAcquire(),
                    contended.ownerChangeShare(), contended.waitP50Micros(), contended.waitP99Micros()));
        }

        if (held != null) {
            out.append("\n## Held leases: ").append(held.leases()).append(" leases held with renewal\n\n");
            out.append("| seconds | renewal round trips/s | Redis commands/s (incl. inside scripts) | JVM threads added by the client | heap bytes per held lease |\n");
            out.append("|---:|---:|---:|---:|---:|\n");
            out.append(String.format(Locale.ROOT, "| %.1f | %.2f | %.2f | %d | %.0f |%n", held.seconds(),
                    held.renewalRoundTripsPerSecond(), held.commandsPerSecond(), held.threadsAdded(), held.heapBytesPerLease()));
        }
        out.append("\nNot measured yet: Redisson (RLock, RFencedLock) as a peer, and the PostgreSQL storage workloads.\n");
        return out.toString();
    }
}
