package dev.fenced.bench;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Collects results and renders them as a Markdown report with the machine, the settings, ratios and the
 * targets of the benchmark issue. The first peer of every comparison is Fenced; ratios are Fenced / peer.
 */
final class Report {

    /** {@code redis-benchmark} rates of the bare lock's scripts, one connection. */
    record Limit(double acquirePerSecond, double releasePerSecond, double acquirePipelined16PerSecond) {

        /** Acquire+release pairs per second one connection can do without pipelining. */
        double pairsPerSecond() {
            return acquirePerSecond <= 0 || releasePerSecond <= 0 ? -1 : 1 / (1 / acquirePerSecond + 1 / releasePerSecond);
        }
    }

    /**
     * The storage workloads: plain vs fenced updates, the unlocked batch vs the locked one (a lock per item) and the
     * batch API's, and the batch API's against the unlocked batch in its own pages (one plain multi-row statement a
     * page), medians of the rounds.
     */
    record Storage(String database, StorageWorkloads.Writes plain, StorageWorkloads.Writes fenced,
            StorageWorkloads.Writes unlockedBatch, StorageWorkloads.Writes lockedBatch, StorageWorkloads.Writes batchApi,
            StorageWorkloads.Writes unlockedMultiRow) {
    }

    private record Target(String what, String measured, boolean met) {
    }

    private final String mode;
    private final String redisUri;
    private final Duration heldLeaseTime;
    private String redisVersion = "unknown";
    private final List<List<Workloads.Uncontended>> uncontended = new ArrayList<>();
    private final List<List<Workloads.Uncontended>> uncontendedFixedNames = new ArrayList<>();
    private Limit limit = new Limit(-1, -1, -1);
    private final List<Workloads.Uncontended> postgresUncontended = new ArrayList<>();
    private final List<Workloads.Contended> contended = new ArrayList<>();
    private final List<Workloads.Held> held = new ArrayList<>();
    private final List<Workloads.Ticks> ticks = new ArrayList<>();
    private @org.jspecify.annotations.Nullable Storage storage;
    private final List<Workloads.Fleet> fleet = new ArrayList<>();

    Report(String mode, String redisUri, Duration heldLeaseTime) {
        this.mode = mode;
        this.redisUri = redisUri;
        this.heldLeaseTime = heldLeaseTime;
    }

    void redisVersion(String version) {
        this.redisVersion = version;
    }

    /** One row: the same in-flight count for every peer, Fenced first. */
    void uncontended(List<Workloads.Uncontended> peers) {
        uncontended.add(List.copyOf(peers));
    }

    /** One row on a fixed name per worker: the same in-flight count for every peer, Fenced first. */
    void uncontendedFixedNames(List<Workloads.Uncontended> peers) {
        uncontendedFixedNames.add(List.copyOf(peers));
    }

    void postgresUncontended(Workloads.Uncontended value) {
        postgresUncontended.add(value);
    }

    void limit(Limit value) {
        this.limit = value;
    }

    void contended(Workloads.Contended value) {
        contended.add(value);
    }

    /** The scheduled-job ticks, ShedLock's own provider last. */
    void ticks(List<Workloads.Ticks> values) {
        ticks.addAll(values);
    }

    void held(Workloads.Held value) {
        held.add(value);
    }

    void fleet(Workloads.Fleet value) {
        fleet.add(value);
    }

    void storage(Storage value) {
        this.storage = value;
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
        out.append("- Fenced with default settings (lease 30 s, renewal 10 s); one Lettuce connection per client\n");
        out.append("- Redisson 3.52.0 with default settings (connection pool, threads), locks with the watchdog "
                + "(timeout 30 s, renewal 10 s), one owner id per acquisition\n");
        if (!ticks.isEmpty()) {
            out.append("- Scheduled-job ticks: Fenced's runJob, and ShedLock's DefaultLockingTaskExecutor over Fenced's "
                    + "FencedLockProvider and over ShedLock's RedisLockProvider 7.10.1 (Spring Data Redis, Lettuce connection "
                    + "factory, defaults: SET NX PX to lock, DEL to unlock); Fenced with default client settings; lock at most "
                    + "for 30 s, at least for 0\n");
        }
        if (storage != null) {
            out.append("- PostgreSQL ").append(storage.database()).append(", R2DBC pool of ").append(BenchPostgres.POOL_SIZE)
                    .append(" connections, ").append(StorageWorkloads.CONCURRENCY).append(" writes in flight\n");
        }
        if (!postgresUncontended.isEmpty()) {
            out.append("- Fenced on PostgreSQL: leases in a lease table of that PostgreSQL, default settings, the same R2DBC pool "
                    + "size; statements counted as the connections the store takes\n");
        }
        out.append('\n');
        renderUncontended(out, uncontended, "distinct names");
        renderUncontended(out, uncontendedFixedNames, "a fixed name per worker");
        renderPostgresUncontended(out);
        renderLimit(out);
        renderContended(out);
        renderTicks(out);
        renderHeld(out);
        renderStorage(out);
        renderFleet(out);
        renderTargets(out);
        return out.toString();
    }

    private void renderUncontended(StringBuilder out, List<List<Workloads.Uncontended>> uncontended, String names) {
        if (uncontended.isEmpty()) {
            return;
        }
        List<String> peers = uncontended.get(0).stream().map(Workloads.Uncontended::lock).toList();
        List<String> columns = new ArrayList<>();
        peers.forEach(peer -> columns.add(peer + " pairs/s"));
        peers.subList(1, peers.size()).forEach(peer -> columns.add("Fenced / " + shortName(peer)));
        if (out.length() > 0 && !out.toString().endsWith("\n\n")) {
            out.append('\n');
        }
        out.append("## Uncontended acquire + release pairs (").append(names).append(")\n\n");
        header(out, columns);
        for (List<Workloads.Uncontended> row : uncontended) {
            out.append("| ").append(row.get(0).inFlight()).append(" |");
            for (Workloads.Uncontended peer : row) {
                out.append(String.format(Locale.ROOT, " %.0f |", peer.pairsPerSecond()));
            }
            for (Workloads.Uncontended peer : row.subList(1, row.size())) {
                out.append(String.format(Locale.ROOT, " %.2f |", row.get(0).pairsPerSecond() / peer.pairsPerSecond()));
            }
            out.append('\n');
        }
        out.append("\nCPU time per pair in µs, the client's JVM (all its threads) / Redis (user + system):\n\n");
        header(out, peers);
        for (List<Workloads.Uncontended> row : uncontended) {
            out.append("| ").append(row.get(0).inFlight()).append(" |");
            for (Workloads.Uncontended peer : row) {
                out.append(peer.serverCpuMicros() < 0
                        ? String.format(Locale.ROOT, " %.1f / ? |", peer.clientCpuMicros())
                        : String.format(Locale.ROOT, " %.1f / %.1f |", peer.clientCpuMicros(), peer.serverCpuMicros()));
            }
            out.append('\n');
        }
        out.append("\nLatency of a pair, p50 / p99 in µs:\n\n");
        header(out, peers);
        for (List<Workloads.Uncontended> row : uncontended) {
            out.append("| ").append(row.get(0).inFlight()).append(" |");
            for (Workloads.Uncontended peer : row) {
                out.append(String.format(Locale.ROOT, " %.0f / %.0f |", peer.p50Micros(), peer.p99Micros()));
            }
            out.append('\n');
        }
    }

    private void renderPostgresUncontended(StringBuilder out) {
        if (postgresUncontended.isEmpty()) {
            return;
        }
        out.append("\n## Fenced on PostgreSQL: uncontended acquire + release pairs (distinct names)\n\n");
        header(out, List.of("pairs/s", "p50 µs", "p99 µs", "on PostgreSQL / on Redis"));
        for (Workloads.Uncontended u : postgresUncontended) {
            Workloads.Uncontended redis = peer(u.inFlight(), "Fenced");
            out.append(String.format(Locale.ROOT, "| %d | %.0f | %.0f | %.0f | %s |%n", u.inFlight(), u.pairsPerSecond(), u.p50Micros(),
                    u.p99Micros(), redis == null ? "n/a" : format("%.2f", u.pairsPerSecond() / redis.pairsPerSecond())));
        }
    }

    /** A table header whose first column is the in-flight count and the others are numbers. */
    private static void header(StringBuilder out, List<String> columns) {
        out.append("| in flight |");
        columns.forEach(column -> out.append(' ').append(column).append(" |"));
        out.append("\n|---:|").append("---:|".repeat(columns.size())).append('\n');
    }

    private void renderLimit(StringBuilder out) {
        out.append("\n## The Redis limit (redis-benchmark, same scripts, one connection)\n\n");
        if (limit.pairsPerSecond() < 0) {
            out.append("redis-benchmark is not installed: no limit measured.\n");
            return;
        }
        out.append(String.format(Locale.ROOT, "| acquire script /s | release script /s | pair limit /s | acquire, pipelined x16 /s |%n"
                + "|---:|---:|---:|---:|%n| %.0f | %.0f | %.0f | %.0f |%n", limit.acquirePerSecond(), limit.releasePerSecond(),
                limit.pairsPerSecond(), limit.acquirePipelined16PerSecond()));
        if (!uncontended.isEmpty()) {
            out.append(String.format(Locale.ROOT, "%nFenced at 1 in flight / pair limit: **%.2f**%n",
                    uncontended.get(0).get(0).pairsPerSecond() / limit.pairsPerSecond()));
        }
    }

    private void renderContended(StringBuilder out) {
        if (contended.isEmpty()) {
            return;
        }
        out.append("\n## Contended: ").append(contended.get(0).workers()).append(" workers, one lock name, one client\n\n");
        out.append("| lock | seconds | acquisitions | owner-changing handoffs/s | requests per acquire | commands per acquire "
                + "(incl. inside scripts) | share changing owner | wait p50 µs | wait p99 µs |\n");
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (Workloads.Contended c : contended) {
            out.append(String.format(Locale.ROOT, "| %s | %.1f | %d | %.0f | %.2f | %.2f | %.2f | %.0f | %.0f |%n", c.lock(),
                    c.seconds(), c.acquisitions(), c.handoffsPerSecond(), c.requestsPerAcquire(), c.commandsPerAcquire(),
                    c.ownerChangeShare(), c.waitP50Micros(), c.waitP99Micros()));
        }
        List<String> ratios = contended.subList(1, contended.size()).stream()
                .map(peer -> format("Fenced / %s handoffs/s: **%.2f**", peer.lock(),
                        contended.get(0).handoffsPerSecond() / peer.handoffsPerSecond()))
                .toList();
        if (!ratios.isEmpty()) {
            out.append('\n').append(String.join("; ", ratios)).append('\n');
        }
    }

    private void renderTicks(StringBuilder out) {
        if (ticks.isEmpty()) {
            return;
        }
        out.append("\n## Scheduled-job ticks: one job, one tick after another\n\n");
        out.append("| lock | ticks | ticks/s | µs per tick | p50 µs | p99 µs | requests per tick | commands per tick "
                + "(incl. inside scripts) |\n");
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|\n");
        for (Workloads.Ticks t : ticks) {
            out.append(String.format(Locale.ROOT, "| %s | %d | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f |%n", t.lock(), t.ticks(),
                    t.ticksPerSecond(), t.meanMicros(), t.p50Micros(), t.p99Micros(), t.requestsPerTick(), t.commandsPerTick()));
        }
        Workloads.Ticks shedLock = ticks.get(ticks.size() - 1);
        List<String> ratios = new ArrayList<>();
        for (Workloads.Ticks fenced : ticks.subList(0, ticks.size() - 1)) {
            ratios.add(format("%s / %s time per tick: **%.2f**; requests per tick: **%.2f**; commands per tick: **%.2f**",
                    fenced.lock(), shedLock.lock(), fenced.meanMicros() / shedLock.meanMicros(),
                    fenced.requestsPerTick() / shedLock.requestsPerTick(), fenced.commandsPerTick() / shedLock.commandsPerTick()));
        }
        out.append('\n').append(String.join("\n\n", ratios)).append('\n');
    }

    private void renderHeld(StringBuilder out) {
        if (held.isEmpty()) {
            return;
        }
        out.append("\n## Held leases: ").append(held.get(0).leases()).append(" leases held with renewal (lease ")
                .append(heldLeaseTime.toSeconds()).append(" s, renewed every third of it)\n\n");
        out.append("| lock | seconds | renewal round trips/s | server commands/s (Redis: incl. inside scripts; PostgreSQL: "
                + "statements) | JVM threads added by the client "
                + "| heap bytes per held lease |\n");
        out.append("|---|---:|---:|---:|---:|---:|\n");
        for (Workloads.Held h : held) {
            out.append(String.format(Locale.ROOT, "| %s | %.1f | %.2f | %.2f | %d | %.0f |%n", h.lock(), h.seconds(),
                    h.renewalRoundTripsPerSecond(), h.commandsPerSecond(), h.threadsAdded(), h.heapBytesPerLease()));
        }
    }

    private void renderStorage(StringBuilder out) {
        Storage s = storage;
        if (s == null) {
            return;
        }
        out.append("\n## Storage: PostgreSQL over R2DBC\n\n");
        out.append("| workload | operations | per second | p50 µs | p99 µs |\n|---|---:|---:|---:|---:|\n");
        for (StorageWorkloads.Writes w : List.of(s.plain(), s.fenced(), s.unlockedBatch(), s.lockedBatch(), s.batchApi(),
                s.unlockedMultiRow())) {
            out.append(String.format(Locale.ROOT, "| %s | %d | %.0f | %.0f | %.0f |%n", w.kind(), w.count(), w.perSecond(),
                    w.p50Micros(), w.p99Micros()));
        }
        out.append(String.format(Locale.ROOT, "%nFenced UPDATE / plain UPDATE: **%.2f**; locked batch / unlocked batch: **%.2f**; "
                + "locked batch (batch API, %d items a batch, %d in flight) / unlocked batch (one UPDATE a row): **%.2f**; "
                + "batch API / unlocked batch of the same pages (one multi-row UPDATE a page): **%.2f**%n",
                s.fenced().perSecond() / s.plain().perSecond(), s.lockedBatch().perSecond() / s.unlockedBatch().perSecond(),
                StorageWorkloads.BATCH, StorageWorkloads.CONCURRENCY / StorageWorkloads.BATCH,
                s.batchApi().perSecond() / s.unlockedBatch().perSecond(),
                s.batchApi().perSecond() / s.unlockedMultiRow().perSecond()));
    }

    private void renderFleet(StringBuilder out) {
        if (fleet.isEmpty()) {
            return;
        }
        out.append("\n## Fleet view: listing every held lock under one prefix\n\n");
        out.append("| store | locks held | ms to list them all | ms per 10,000 locks |\n|---|---:|---:|---:|\n");
        for (Workloads.Fleet f : fleet) {
            out.append(String.format(Locale.ROOT, "| %s | %d | %.0f | %.1f |%n", f.store(), f.locks(), f.totalMillis(),
                    f.millisPer10k()));
        }
    }

    private void renderTargets(StringBuilder out) {
        List<Target> targets = targets();
        if (targets.isEmpty()) {
            return;
        }
        out.append("\n## Against the targets of the benchmark issue\n\n");
        if (!"full".equals(mode) && !mode.endsWith("full size")) {
            out.append("Quick mode: the counts are too small for these verdicts to mean anything.\n\n");
        }
        out.append("| target | measured | |\n|---|---|---|\n");
        for (Target t : targets) {
            out.append("| ").append(t.what()).append(" | ").append(t.measured()).append(" | ").append(t.met() ? "met" : "missed")
                    .append(" |\n");
        }
    }

    private List<Target> targets() {
        List<Target> targets = new ArrayList<>();
        for (boolean fixedNames : new boolean[] {false, true}) {
            String names = fixedNames ? ", a fixed name per worker" : "";
            for (int inFlight : new int[] {1, 64, 1_024}) {
                Workloads.Uncontended fenced = peer(fixedNames ? uncontendedFixedNames : uncontended, inFlight, "Fenced");
                Workloads.Uncontended bare = peer(fixedNames ? uncontendedFixedNames : uncontended, inFlight, "bare Lettuce lock");
                if (fenced == null || bare == null) {
                    continue;
                }
                double ratio = fenced.pairsPerSecond() / bare.pairsPerSecond();
                targets.add(new Target(inFlight + " in flight" + names + " ≥ 0.95× the bare (naive) Lettuce lock",
                        format("%.2f", ratio), ratio >= 0.95));
                double p99 = fenced.p99Micros() / bare.p99Micros();
                targets.add(new Target(inFlight + " in flight" + names + ": p99 ≤ 1.2× the bare lock's",
                        format("%.0f µs vs %.0f µs (%.2f)", fenced.p99Micros(), bare.p99Micros(), p99), p99 <= 1.2));
                if (inFlight == 64) {
                    targets.add(new Target("64 in flight" + names + " ≥ 1.3× the bare lock (batched lock commands)",
                            format("%.2f", ratio), ratio >= 1.3));
                }
            }
        }
        Workloads.Uncontended serial = peer(1, "Fenced");
        if (serial != null && limit.pairsPerSecond() > 0) {
            double ratio = serial.pairsPerSecond() / limit.pairsPerSecond();
            targets.add(new Target("1 in flight ≥ 0.9 of the single-connection pair limit", format("%.2f", ratio), ratio >= 0.9));
        }
        Workloads.Uncontended fenced64 = peer(64, "Fenced");
        Workloads.Uncontended rlock64 = peer(64, "Redisson RLock");
        if (fenced64 != null && rlock64 != null) {
            double ratio = fenced64.pairsPerSecond() / rlock64.pairsPerSecond();
            targets.add(new Target("64 in flight ≥ 3× Redisson RLock (reactive)", format("%.2f×", ratio), ratio >= 3));
        }
        Workloads.Contended fencedContended = contended("Fenced");
        Workloads.Contended rlockContended = contended("Redisson RLock");
        if (fencedContended != null && rlockContended != null) {
            double ratio = fencedContended.handoffsPerSecond() / rlockContended.handoffsPerSecond();
            targets.add(new Target("contended: ≥ 1.2× Redisson RLock's owner-changing handoffs/s", format("%.2f×", ratio), ratio >= 1.2));
        }
        if (fencedContended != null) {
            targets.add(new Target("contended: < 3 Redis requests per successful acquire",
                    format("%.2f", fencedContended.requestsPerAcquire()), fencedContended.requestsPerAcquire() < 3));
            targets.add(new Target("contended: ≥ 80% of acquisitions change owner",
                    format("%.0f%%", fencedContended.ownerChangeShare() * 100), fencedContended.ownerChangeShare() >= 0.8));
            targets.add(new Target("contended: wait p99 ≤ 100 ms", format("%.0f ms", fencedContended.waitP99Micros() / 1000),
                    fencedContended.waitP99Micros() <= 100_000));
        }
        Workloads.Held fencedHeld = held.stream().filter(h -> h.lock().equals("Fenced")).findFirst().orElse(null);
        if (fencedHeld != null) {
            double period = heldLeaseTime.toMillis() / 3000.0;
            double per100 = fencedHeld.renewalRoundTripsPerSecond() * period / (fencedHeld.leases() / 100.0);
            targets.add(new Target("held: ≤ 1 renewal round trip per 100 leases per renewal period",
                    format("%.2f/s for %d leases every %.0f s (%.2f per 100)", fencedHeld.renewalRoundTripsPerSecond(),
                            fencedHeld.leases(), period, per100), per100 <= 1));
            targets.add(new Target("held: < 1 KB heap per held lease", format("%.0f B", fencedHeld.heapBytesPerLease()),
                    fencedHeld.heapBytesPerLease() < 1024));
        }
        Storage s = storage;
        if (s != null) {
            double update = s.fenced().perSecond() / s.plain().perSecond();
            double batch = s.lockedBatch().perSecond() / s.unlockedBatch().perSecond();
            targets.add(new Target("fenced UPDATE ≥ 0.95× plain UPDATE", format("%.2f", update), update >= 0.95));
            targets.add(new Target("locked batch ≥ 0.8× unlocked batch", format("%.2f", batch), batch >= 0.8));
            double api = s.batchApi().perSecond() / s.unlockedBatch().perSecond();
            targets.add(new Target("locked batch (batch API) ≥ 0.9× unlocked (one UPDATE a row)", format("%.2f", api),
                    api >= 0.9));
            double pages = s.batchApi().perSecond() / s.unlockedMultiRow().perSecond();
            targets.add(new Target("locked batch (batch API) ≥ 0.9× unlocked in the same pages (one multi-row UPDATE a "
                    + "page)", format("%.2f", pages), pages >= 0.9));
        }
        return targets;
    }

    private Workloads.@org.jspecify.annotations.Nullable Uncontended peer(int inFlight, String lock) {
        return peer(uncontended, inFlight, lock);
    }

    private static Workloads.@org.jspecify.annotations.Nullable Uncontended peer(List<List<Workloads.Uncontended>> rows,
            int inFlight, String lock) {
        for (List<Workloads.Uncontended> row : rows) {
            for (Workloads.Uncontended u : row) {
                if (u.inFlight() == inFlight && u.lock().equals(lock)) {
                    return u;
                }
            }
        }
        return null;
    }

    private Workloads.@org.jspecify.annotations.Nullable Contended contended(String lock) {
        return contended.stream().filter(c -> c.lock().equals(lock)).findFirst().orElse(null);
    }

    /** The column title of a ratio: "bare" for the bare Lettuce lock, Redisson's class name for Redisson's locks. */
    private static String shortName(String lock) {
        if (lock.equals(BareLettuceLock.CONSOLIDATED)) {
            return "bare, consolidated";
        }
        return lock.startsWith("Redisson ") ? lock.substring("Redisson ".length()) : lock.replace(" Lettuce lock", "");
    }

    private static String format(String pattern, Object... args) {
        return String.format(Locale.ROOT, pattern, args);
    }
}
