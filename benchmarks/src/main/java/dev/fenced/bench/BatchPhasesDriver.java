package dev.fenced.bench;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.r2dbc.FencedWrite;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Result;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Issue 26's split of the batch API's page: where the time of one page of {@value StorageWorkloads#BATCH} items goes,
 * one page at a time (no other page in flight, so each phase's time is its own round trips and work, not a queue).
 * Per page it times, on the same pool and rows: {@code tryAcquireAll} of the page's names, {@code updateAll} on the
 * connection factory (its connection, {@code BEGIN}, the multi-row fenced statement, {@code COMMIT}), and
 * {@code releaseAll}; and, for the same rows, {@code updateAll} on a connection in auto-commit (the statement
 * alone), the unlocked multi-row {@code UPDATE} of the storage workload in auto-commit, and the same unlocked
 * statement between {@code BEGIN} and {@code COMMIT}. It prints the median and p90 of each, in microseconds, per
 * round, after a warm-up round.
 *
 * <p>Two other modes, as the storage workload runs them (two pages in flight): {@code lanes}, the batch API's pages and
 * the unlocked multi-row pages in turns, items/s and p50 of each; {@code lanesplit}, the batch API's pages alone with
 * the p50 of each of their three calls and, per page, the client's CPU time (the whole process), Redis's CPU time and
 * the time Redis spent executing the lock's requests; {@code locks}, the batch API's lock calls alone (acquire then
 * release), pages/s and the client's CPU time per page; {@code updates}, the storage workload's plain and fenced
 * single-row {@code UPDATE}s in turns ({@code pages} of each, 64 in flight), their rates and client CPU per update.
 *
 * <p>Run: {@code java -cp <benchmarks classpath> dev.fenced.bench.BatchPhasesDriver [redisUri] [pages] [rounds]
 * [lanes|lanesplit|locks|updates]}, with {@code FENCED_POSTGRES_URL} naming the database (else the tests' resolution: an embedded
 * server, whose figures are not this machine's PostgreSQL's). A measurement, not a test: it asserts nothing beyond
 * every row being written. It deletes the keys of its prefix when done.
 */
final class BatchPhasesDriver {

    private static final int ROWS = 10_000;

    private static final com.sun.management.OperatingSystemMXBean OS =
            (com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory.getOperatingSystemMXBean();

    private BatchPhasesDriver() {
    }

    /**
     * Runs the rounds and prints one line per phase and round.
     *
     * @param args the Redis URI, pages per round, measured rounds
     */
    public static void main(String[] args) {
        String uri = args.length > 0 ? args[0] : "redis://127.0.0.1:6379";
        int pages = args.length > 1 ? Integer.parseInt(args[1]) : 300;
        int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 3;
        String prefix = "issue26-batch-" + ProcessHandle.current().pid() + ":";
        try {
            run(uri, pages, rounds, args.length > 3 ? args[3] : "", prefix);
        } finally {
            OneInFlightDriver.cleanUp(uri, prefix);
        }
    }

    private static void run(String uri, int pages, int rounds, String mode, String prefix) {
        try (BenchPostgres db = BenchPostgres.start(ROWS);
                FencedLock locks = new FencedLock(uri, prefix)) {
            if (mode.equals("lanes")) {
                // The storage workload's own pages, two in flight: the batch API and the unlocked multi-row batch in
                // turns, items/s of each per round (for a profile of the batch API under its real concurrency).
                StorageWorkloads storage = new StorageWorkloads(db, ROWS);
                for (int round = 0; round <= rounds; round++) {
                    StorageWorkloads.Writes locked = storage.batchApi(locks.client(), pages * StorageWorkloads.BATCH, round);
                    StorageWorkloads.Writes unlocked = storage.unlockedMultiRow(pages * StorageWorkloads.BATCH, round);
                    System.out.printf(Locale.ROOT, "round %d  batch API %8.0f items/s  unlocked multi-row %8.0f items/s  "
                            + "ratio %.2f  p50 %.0f / %.0f us%n", round, locked.perSecond(), unlocked.perSecond(),
                            locked.perSecond() / unlocked.perSecond(), locked.p50Micros(), unlocked.p50Micros());
                }
                return;
            }
            if (mode.equals("updates")) {
                // Single-row plain and fenced UPDATEs, 64 in flight, in turns: the storage workload's first pair.
                StorageWorkloads storage = new StorageWorkloads(db, ROWS);
                FencedLease lease = Objects.requireNonNull(locks.client().acquire("storage-updates")
                        .block(Duration.ofSeconds(30)));
                for (int round = 0; round <= rounds; round++) {
                    long c0 = OS.getProcessCpuTime();
                    StorageWorkloads.Writes plain = storage.plainUpdates(pages, round);
                    long c1 = OS.getProcessCpuTime();
                    StorageWorkloads.Writes fenced = storage.fencedUpdates(lease, pages, round);
                    long c2 = OS.getProcessCpuTime();
                    System.out.printf(Locale.ROOT, "round %d  plain %8.0f/s  fenced %8.0f/s  ratio %.2f  client CPU per "
                            + "update %5.1f / %5.1f us%n", round, plain.perSecond(), fenced.perSecond(),
                            fenced.perSecond() / plain.perSecond(), (c1 - c0) / 1e3 / pages, (c2 - c1) / 1e3 / pages);
                }
                lease.release().block(Duration.ofSeconds(30));
                return;
            }
            if (mode.equals("locks")) {
                // The batch API's lock calls alone, two pages in flight: tryAcquireAll then releaseAll, for a
                // profile of the lock client's own work per page.
                for (int round = 0; round <= rounds; round++) {
                    long cpu0 = OS.getProcessCpuTime();
                    long start = System.nanoTime();
                    Flux.range(0, pages).flatMap(page -> {
                        List<String> names = new ArrayList<>();
                        for (int r = 0; r < StorageWorkloads.BATCH; r++) {
                            names.add("account-" + (page * StorageWorkloads.BATCH + r) % ROWS);
                        }
                        return locks.client().tryAcquireAll(names).flatMap(batch -> batch.releaseAll());
                    }, 2).blockLast(Duration.ofMinutes(10));
                    double seconds = (System.nanoTime() - start) / 1e9;
                    System.out.printf(Locale.ROOT, "round %d  %8.0f pages/s  client CPU per page %5d us%n", round,
                            pages / seconds, (OS.getProcessCpuTime() - cpu0) / 1_000 / pages);
                }
                return;
            }
            if (mode.equals("lanesplit")) {
                for (int round = 0; round <= rounds; round++) {
                    Latencies acquire = new Latencies(pages);
                    Latencies write = new Latencies(pages);
                    Latencies release = new Latencies(pages);
                    long balance = round;
                    RedisStats redis = new RedisStats(uri);
                    double redisCpu0 = redis.cpuSeconds();
                    long redisMicros0 = redis.requestMicros();
                    long cpu0 = OS.getProcessCpuTime();
                    long start = System.nanoTime();
                    FencedWrite spec = FencedWrite.into(db.table);
                    Flux.range(0, pages).flatMap(page -> Mono.defer(() -> {
                        List<String> names = new ArrayList<>();
                        for (int r = 0; r < StorageWorkloads.BATCH; r++) {
                            names.add("account-" + (page * StorageWorkloads.BATCH + r) % ROWS);
                        }
                        long t0 = System.nanoTime();
                        return locks.client().tryAcquireAll(names).flatMap(batch -> {
                            long t1 = System.nanoTime();
                            acquire.record(t1 - t0);
                            List<FencedWrite.Item> items = new ArrayList<>();
                            for (String name : names) {
                                long id = Long.parseLong(name.substring("account-".length()));
                                items.add(new FencedWrite.Item(spec.key("id", id).set("balance", balance),
                                        Objects.requireNonNull(batch.lease(name))));
                            }
                            return FencedWrite.updateAll(db.connections, items).flatMap(outcomes -> {
                                long t2 = System.nanoTime();
                                write.record(t2 - t1);
                                return batch.releaseAll().doOnSuccess(v -> release.record(System.nanoTime() - t2));
                            });
                        });
                    }), 2).blockLast(Duration.ofMinutes(10));
                    double seconds = (System.nanoTime() - start) / 1e9;
                    long clientCpu = (OS.getProcessCpuTime() - cpu0) / 1_000 / pages;
                    double redisCpu = (redis.cpuSeconds() - redisCpu0) * 1e6 / pages;
                    double redisMicros = (double) (redis.requestMicros() - redisMicros0) / pages;
                    redis.close();
                    System.out.printf(Locale.ROOT, "round %d  %8.0f items/s  p50 acquire %5.0f  updateAll %5.0f  release %5.0f us"
                            + "  per page: client CPU %5d us, Redis CPU %5.0f us, Redis executing %5.0f us%n",
                            round, pages * StorageWorkloads.BATCH / seconds, acquire.percentileMicros(50),
                            write.percentileMicros(50), release.percentileMicros(50), clientCpu, redisCpu, redisMicros);
                }
                return;
            }
            String[] phases = {"tryAcquireAll", "updateAll(factory): connection+BEGIN+statement+COMMIT",
                "releaseAll", "updateAll(connection), auto-commit", "unlocked multi-row, auto-commit",
                "unlocked multi-row, BEGIN+statement+COMMIT", "whole page (first three)"};
            for (int round = 0; round <= rounds; round++) {
                long[][] micros = new long[phases.length][pages];
                long[][] cpu = new long[phases.length][pages];
                for (int page = 0; page < pages; page++) {
                    List<Long> ids = new ArrayList<>();
                    for (int r = 0; r < StorageWorkloads.BATCH; r++) {
                        ids.add((long) ((page * StorageWorkloads.BATCH + r) % ROWS));
                    }
                    long balance = round * 1_000_000L + page;
                    onePage(db, locks.client(), ids, balance, micros, cpu, page);
                }
                if (round == 0) {
                    continue;
                }
                for (int p = 0; p < phases.length; p++) {
                    long[] sorted = micros[p].clone();
                    Arrays.sort(sorted);
                    System.out.printf(Locale.ROOT, "round %d  %-56s p50 %6d us  p90 %6d us  client CPU %6d us%n", round,
                            phases[p], sorted[pages / 2], sorted[pages * 9 / 10], Arrays.stream(cpu[p]).sum() / pages);
                }
            }
        }
    }

    private static void onePage(BenchPostgres db, FencedLockClient client, List<Long> ids, long balance, long[][] micros,
            long[][] cpu, int page) {
        StorageWorkloads unlocked = new StorageWorkloads(db, ROWS);
        long[] t = new long[8];
        long[] c = new long[8];
        FencedWrite write = FencedWrite.into(db.table);
        List<String> names = ids.stream().map(id -> "account-" + id).toList();
        stamp(t, c, 0);
        var batch = Objects.requireNonNull(client.tryAcquireAll(names).block(Duration.ofSeconds(30)));
        stamp(t, c, 1);
        if (!batch.busy().isEmpty()) {
            throw BenchmarkException.notAcquired("Fenced batch", batch.busy().get(0));
        }
        List<FencedWrite.Item> items = new ArrayList<>();
        for (long id : ids) {
            FencedLease lease = Objects.requireNonNull(batch.lease("account-" + id));
            items.add(new FencedWrite.Item(write.key("id", id).set("balance", balance), lease));
        }
        var outcomes = Objects.requireNonNull(FencedWrite.updateAll(db.connections, items).block(Duration.ofSeconds(30)));
        stamp(t, c, 2);
        outcomes.forEach(o -> {
            if (!o.written()) {
                throw new IllegalStateException("refused", o.refusal());
            }
        });
        // The same rows again, the statement alone on an auto-commit connection (the leases are still held).
        List<FencedWrite.Item> again = new ArrayList<>();
        for (long id : ids) {
            again.add(new FencedWrite.Item(write.key("id", id).set("balance", balance + 1),
                    Objects.requireNonNull(batch.lease("account-" + id))));
        }
        stamp(t, c, 3);
        Mono.usingWhen(db.connections.create(), connection -> FencedWrite.updateAll(connection, again), Connection::close)
                .block(Duration.ofSeconds(30));
        stamp(t, c, 4);
        batch.releaseAll().block(Duration.ofSeconds(30));
        stamp(t, c, 5);
        unlocked.multiRowUpdate(ids, balance, false).block(Duration.ofSeconds(30));
        stamp(t, c, 6);
        unlocked.multiRowUpdate(ids, balance, true).block(Duration.ofSeconds(30));
        stamp(t, c, 7);
        for (int p = 0; p < PHASES.length; p++) {
            micros[p][page] = span(t, PHASES[p]) / 1_000;
            cpu[p][page] = span(c, PHASES[p]) / 1_000;
        }
    }

    /**
     * The phases of {@link #onePage}, in the order of the printed names: each a list of (from, to) stamp pairs whose
     * spans add up (the whole page is the first three calls).
     */
    private static final int[][] PHASES = {{0, 1}, {1, 2}, {4, 5}, {3, 4}, {5, 6}, {6, 7}, {0, 2, 4, 5}};

    private static void stamp(long[] wall, long[] cpu, int at) {
        wall[at] = System.nanoTime();
        cpu[at] = OS.getProcessCpuTime();
    }

    private static long span(long[] stamps, int[] pairs) {
        long sum = 0;
        for (int k = 0; k < pairs.length; k += 2) {
            sum += stamps[pairs[k + 1]] - stamps[pairs[k]];
        }
        return sum;
    }
}
