package dev.fenced.bench;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.PostgresLeaseTable;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.function.IntFunction;

/**
 * Runs every workload against every peer (Fenced, a bare Lettuce lock, Redisson's {@code RLock} and
 * {@code RFencedLock}, the Redis limit; PostgreSQL for the storage workloads) in one process and writes
 * {@code results.md} with ratios.
 *
 * <p>Run: {@code ./mvnw -B -q install -DskipTests && ./mvnw -B -pl benchmarks verify -Dbench.mode=full};
 * results go to {@code benchmarks/target/benchmarks/}. The harness starts its own {@code redis-server} on a
 * free port (so no other client's commands are counted), or uses the tests' Redis when the binary is missing.
 */
public final class Benchmarks {

    /** How much to run. */
    enum Mode {
        /** Small counts: proves the harness works (CI). */
        QUICK(1, 1, 2_000, 300, Duration.ofSeconds(2), 500, Duration.ofSeconds(3), Duration.ofSeconds(3), 2_000, 1_000, 400, 400),
        /** The numbers quoted in the README. */
        FULL(1, 3, 50_000, 5_000, Duration.ofSeconds(20), 10_000, Duration.ofSeconds(30), Duration.ofSeconds(30), 100_000,
                10_000, 60_000, 10_000);

        final int warmups;
        final int rounds;
        final int pairs;
        final int serialPairs;
        final Duration contention;
        final int heldLeases;
        final Duration heldLeaseTime;
        final Duration heldFor;
        final int limitRequests;
        final int accounts;
        final int updates;
        final int batchItems;

        Mode(int warmups, int rounds, int pairs, int serialPairs, Duration contention, int heldLeases,
                Duration heldLeaseTime, Duration heldFor, int limitRequests, int accounts, int updates, int batchItems) {
            this.warmups = warmups;
            this.rounds = rounds;
            this.pairs = pairs;
            this.serialPairs = serialPairs;
            this.contention = contention;
            this.heldLeases = heldLeases;
            this.heldLeaseTime = heldLeaseTime;
            this.heldFor = heldFor;
            this.limitRequests = limitRequests;
            this.accounts = accounts;
            this.updates = updates;
            this.batchItems = batchItems;
        }
    }

    private Benchmarks() {
    }

    /**
     * Entry point: {@code [quick|full] [output directory]}, or {@code fleet [output directory]} for the fleet-view
     * workload alone at full size (100,000 locks), into {@code results-fleet.md}, or {@code storage [output directory]}
     * for the storage workloads alone at full size, into {@code results-storage.md}.
     *
     * @param args the mode and the output directory
     * @throws IOException if the results cannot be written
     */
    public static void main(String[] args) throws IOException {
        Path chosen = Path.of(args.length > 1 ? args[1] : "target/benchmarks");
        if (args.length > 0 && args[0].equals("fleet")) {
            alone("fleet view only, full size", chosen.resolve("results-fleet.md"),
                    (report, uri, prefix) -> fleet(report, uri, prefix + "fv:", Mode.FULL));
            return;
        }
        if (args.length > 0 && args[0].equals("storage")) {
            // The storage workloads alone at full size, for the batch rows' ratios without the lock workloads' run.
            alone("storage workloads only, full size", chosen.resolve("results-storage.md"),
                    (report, uri, prefix) -> report.storage(storage(uri, prefix + "s:", Mode.FULL)));
            return;
        }
        Mode mode = args.length > 0 ? Mode.valueOf(args[0].toUpperCase(java.util.Locale.ROOT)) : Mode.QUICK;
        System.out.println(Files.readString(run(mode, chosen)));
    }

    /** One workload of the harness, run alone against a Redis of its own. */
    @FunctionalInterface
    private interface Alone {
        void run(Report report, String redisUri, String prefix);
    }

    /** Runs one workload alone, at full size, into {@code file}, and prints the report. */
    private static void alone(String what, Path file, Alone workload) throws IOException {
        try (BenchRedis redis = BenchRedis.start()) {
            String prefix = "bench-" + UUID.randomUUID().toString().substring(0, 8) + ":";
            Report report = new Report(what, redis.uri(), Duration.ZERO);
            try {
                workload.run(report, redis.uri(), prefix);
            } finally {
                cleanUp(redis.uri(), prefix);
            }
            Files.createDirectories(file.getParent());
            Files.writeString(file, report.render());
            System.out.println(Files.readString(file));
        }
    }

    /**
     * Runs everything and writes the report.
     *
     * @param mode how much to run
     * @param output the directory to write {@code results.md} to
     * @return the report file
     * @throws IOException if it cannot be written
     */
    static Path run(Mode mode, Path output) throws IOException {
        try (BenchRedis redis = BenchRedis.start()) {
            return run(mode, output, redis);
        }
    }

    private static Path run(Mode mode, Path output, BenchRedis redis) throws IOException {
        String prefix = "bench-" + UUID.randomUUID().toString().substring(0, 8) + ":";
        String uri = redis.uri();
        Report report = new Report(mode.name().toLowerCase(java.util.Locale.ROOT), uri, mode.heldLeaseTime);
        try (RedisStats stats = new RedisStats(uri)) {
            report.redisVersion(stats.serverVersion());
            try (FencedLock fenced = new FencedLock(uri, prefix + "f:");
                    BareLettuceLock bare = new BareLettuceLock(uri, prefix + "b:", false);
                    BareLettuceLock bareConsolidated = new BareLettuceLock(uri, prefix + "bc:", true);
                    RedissonLock rlock = new RedissonLock(RedissonLock.Kind.RLOCK, uri, prefix + "r:");
                    RedissonLock rfenced = new RedissonLock(RedissonLock.Kind.FENCED, uri, prefix + "rf:")) {
                for (int inFlight : new int[] {1, 64, 1_024}) {
                    int pairs = inFlight == 1 ? mode.serialPairs : mode.pairs;
                    report.uncontended(interleaved(List.of(fenced, bare, bareConsolidated, rlock, rfenced), inFlight, pairs, mode, stats,
                            false));
                }
                for (int inFlight : new int[] {1, 64, 1_024}) {
                    int pairs = inFlight == 1 ? mode.serialPairs : mode.pairs;
                    report.uncontendedFixedNames(interleaved(List.of(fenced, bare, bareConsolidated), inFlight, pairs, mode, stats,
                            true));
                }
                report.limit(limits(redis, mode));
                for (WaitingLock lock : List.<WaitingLock>of(fenced, rlock, rfenced)) {
                    report.contended(Workloads.contended(lock, stats, 64, mode.contention));
                }
            }
            report.ticks(scheduledJobTicks(uri, prefix, mode, stats));
            // Held leases last on Redis, with no other client open, so that the counters are theirs alone.
            report.held(Workloads.held(() -> FencedLock.held(uri, prefix + "h:", mode.heldLeaseTime), stats, mode.heldLeases,
                    mode.heldFor));
            report.held(Workloads.held(() -> RedissonLock.held(uri, prefix + "rh:", mode.heldLeaseTime), stats,
                    mode.heldLeases, mode.heldFor));
            postgresLocks(report, prefix + "p:", mode);
            fleet(report, uri, prefix + "fv:", mode);
            report.storage(storage(uri, prefix + "s:", mode));
        } finally {
            cleanUp(uri, prefix);
        }
        Files.createDirectories(output);
        Path file = output.resolve("results.md");
        Files.writeString(file, report.render());
        return file;
    }

    /**
     * Fenced with its leases in PostgreSQL (a lease table of its own, dropped at the end): uncontended pairs at 1
     * and 64 in flight, the contended workload and the held leases, with statements counted as the connections
     * the store takes.
     */
    private static void postgresLocks(Report report, String prefix, Mode mode) {
        try (BenchPostgres db = BenchPostgres.start(0)) {
            PostgresLeaseTable table = PostgresLeaseTable.named(db.table.replace("bench_accounts_", "bench_lease_"));
            CountingConnections counted = new CountingConnections(db.connections);
            try {
                table.create(db.connections).block(Duration.ofSeconds(30));
                try (FencedLock lock = FencedLock.onPostgres(counted, table, prefix)) {
                    for (int inFlight : new int[] {1, 64}) {
                        report.postgresUncontended(interleaved(List.of(lock), inFlight,
                                inFlight == 1 ? mode.serialPairs : mode.pairs, mode, counted, false).get(0));
                    }
                    report.contended(Workloads.contended(lock, counted, 64, mode.contention));
                }
                report.held(Workloads.held(() -> FencedLock.heldOnPostgres(counted, table, prefix + "h:", mode.heldLeaseTime),
                        counted, mode.heldLeases, mode.heldFor));
            } finally {
                db.execute("DROP TABLE IF EXISTS " + table.name());
            }
        }
    }

    /** How many locks the fleet view lists: 100,000 under one prefix in a full run. */
    private static int fleetLocks(Mode mode) {
        return mode == Mode.FULL ? 100_000 : 2_000;
    }

    /**
     * The fleet view on Redis and on PostgreSQL (a lease table of its own, dropped at the end): one client holds
     * the locks with a long lease (so renewals do not share the measured time), another lists them.
     */
    private static void fleet(Report report, String uri, String prefix, Mode mode) {
        Duration lease = Duration.ofMinutes(30);
        try (dev.fenced.lock.FencedLockClient holder = dev.fenced.lock.FencedLockClient.builder().redisUri(uri)
                        .keyPrefix(prefix).leaseTime(lease).build();
                dev.fenced.lock.FencedLockClient viewer = dev.fenced.lock.FencedLockClient.builder().redisUri(uri)
                        .keyPrefix(prefix).build()) {
            report.fleet(Workloads.fleet("Redis", holder, viewer, fleetLocks(mode), mode.warmups, mode.rounds));
        }
        try (BenchPostgres db = BenchPostgres.start(0)) {
            PostgresLeaseTable table = PostgresLeaseTable.named(db.table.replace("bench_accounts_", "bench_fleet_"));
            try {
                table.create(db.connections).block(Duration.ofSeconds(30));
                try (dev.fenced.lock.FencedLockClient holder = dev.fenced.lock.FencedLockClient.builder()
                                .postgres(db.connections, table).keyPrefix(prefix).leaseTime(lease).build();
                        dev.fenced.lock.FencedLockClient viewer = dev.fenced.lock.FencedLockClient.builder()
                                .postgres(db.connections, table).keyPrefix(prefix).build()) {
                    report.fleet(Workloads.fleet("PostgreSQL", holder, viewer, fleetLocks(mode), mode.warmups, mode.rounds));
                }
            } finally {
                db.execute("DROP TABLE IF EXISTS " + table.name());
            }
        }
    }

    /** Plain vs fenced updates, then the unlocked vs the locked batch; each the median of its rounds. */
    private static Report.Storage storage(String redisUri, String prefix, Mode mode) {
        try (BenchPostgres db = BenchPostgres.start(mode.accounts); FencedLock locks = new FencedLock(redisUri, prefix)) {
            StorageWorkloads storage = new StorageWorkloads(db, mode.accounts);
            FencedLease lease = locks.client().acquire("storage-updates").block(Duration.ofSeconds(30));
            if (lease == null) {
                throw BenchmarkException.notAcquired("Fenced", "storage-updates");
            }
            List<StorageWorkloads.Writes> updates = inTurns(mode, round -> storage.plainUpdates(mode.updates, round),
                    round -> storage.fencedUpdates(lease, mode.updates, round));
            lease.release().block(Duration.ofSeconds(30));
            // The batch's leases have tokens of their own lock names: start them from an empty fence.
            db.clearTokens();
            List<StorageWorkloads.Writes> batches = inTurns(mode, List.of(round -> storage.unlockedBatch(mode.batchItems, round),
                    round -> storage.lockedBatch(locks.client(), mode.batchItems, round),
                    round -> storage.batchApi(locks.client(), mode.batchItems, round),
                    round -> storage.unlockedMultiRow(mode.batchItems, round)));
            return new Report.Storage(db.version() + " at " + db.server, updates.get(0), updates.get(1), batches.get(0),
                    batches.get(1), batches.get(2), batches.get(3));
        }
    }

    /**
     * Both sides of a comparison in every round, taking turns to go first, so that neither always runs on a
     * table the other has just warmed or dirtied.
     *
     * @return the medians of the measured rounds: {@code a}'s, then {@code b}'s
     */
    private static List<StorageWorkloads.Writes> inTurns(Mode mode, IntFunction<StorageWorkloads.Writes> a,
            IntFunction<StorageWorkloads.Writes> b) {
        return inTurns(mode, List.of(a, b));
    }

    /**
     * Every side of a comparison in every round, each round starting with the next side, so that none always runs
     * on a table another has just warmed or dirtied.
     *
     * @return the medians of the measured rounds, side by side
     */
    private static List<StorageWorkloads.Writes> inTurns(Mode mode, List<IntFunction<StorageWorkloads.Writes>> sides) {
        List<List<StorageWorkloads.Writes>> measured = new ArrayList<>();
        sides.forEach(side -> measured.add(new ArrayList<>()));
        for (int round = 0; round < mode.warmups + mode.rounds; round++) {
            for (int turn = 0; turn < sides.size(); turn++) {
                int side = (round + turn) % sides.size();
                StorageWorkloads.Writes writes = sides.get(side).apply(round);
                if (round >= mode.warmups) {
                    measured.get(side).add(writes);
                }
            }
        }
        List<StorageWorkloads.Writes> medians = new ArrayList<>();
        measured.forEach(rounds -> medians.add(median(rounds)));
        return medians;
    }

    private static StorageWorkloads.Writes median(List<StorageWorkloads.Writes> rounds) {
        List<StorageWorkloads.Writes> sorted = new ArrayList<>(rounds);
        sorted.sort((a, b) -> Double.compare(a.perSecond(), b.perSecond()));
        return sorted.get(sorted.size() / 2);
    }

    /**
     * Every lock in every round, each round starting with another lock, so that no lock always runs first (on a
     * cold JIT, a fresh connection) or right after a given other one; the warm-up rounds run every lock too, so
     * that each one's code is compiled before any is measured. Returns each lock's median round, in the order
     * given.
     */
    private static List<Workloads.Uncontended> interleaved(List<LockUnderTest> locks, int inFlight, int pairs, Mode mode,
            ServerCounters server, boolean fixedNames) {
        List<List<Workloads.Uncontended>> rounds = new ArrayList<>();
        for (int i = 0; i < locks.size(); i++) {
            rounds.add(new ArrayList<>());
        }
        for (int round = 0; round < mode.warmups + mode.rounds; round++) {
            for (int k = 0; k < locks.size(); k++) {
                int which = (round + k) % locks.size();
                String name = (round < mode.warmups ? "warm-" : "run-") + (fixedNames ? "fixed-" : "") + inFlight + "-" + round;
                Workloads.Uncontended result = Workloads.uncontended(locks.get(which), inFlight, pairs, name, server, fixedNames);
                if (round >= mode.warmups) {
                    rounds.get(which).add(result);
                }
            }
        }
        List<Workloads.Uncontended> medians = new ArrayList<>();
        for (List<Workloads.Uncontended> own : rounds) {
            own.sort((a, b) -> Double.compare(a.pairsPerSecond(), b.pairsPerSecond()));
            medians.add(own.get(own.size() / 2));
        }
        return medians;
    }

    /**
     * Ticks of a scheduled job: Fenced's job API, and ShedLock's executor over Fenced's provider and over
     * ShedLock's Redis provider, on the same Redis, interleaved as the pairs are (each round starts with another
     * lock). Returns each lock's median round, ShedLock's last.
     */
    private static List<Workloads.Ticks> scheduledJobTicks(String uri, String prefix, Mode mode, RedisStats stats) {
        try (ScheduledJobLock job = ScheduledJobLock.fencedJob(uri, prefix + "jj:");
                ScheduledJobLock fenced = ScheduledJobLock.fenced(uri, prefix + "jf:");
                ScheduledJobLock shedLock = ScheduledJobLock.shedLock(uri, prefix + "js:")) {
            List<ScheduledJobLock> locks = List.of(job, fenced, shedLock);
            List<List<Workloads.Ticks>> rounds = List.of(new ArrayList<>(), new ArrayList<>(), new ArrayList<>());
            for (int round = 0; round < mode.warmups + mode.rounds; round++) {
                for (int k = 0; k < locks.size(); k++) {
                    int which = (round + k) % locks.size();
                    Workloads.Ticks result = Workloads.ticks(locks.get(which), stats, mode.serialPairs, "job-" + round);
                    if (round >= mode.warmups) {
                        rounds.get(which).add(result);
                    }
                }
            }
            List<Workloads.Ticks> medians = new ArrayList<>();
            for (List<Workloads.Ticks> own : rounds) {
                own.sort((a, b) -> Double.compare(a.ticksPerSecond(), b.ticksPerSecond()));
                medians.add(own.get(own.size() / 2));
            }
            return medians;
        }
    }

    private static Report.Limit limits(BenchRedis redis, Mode mode) {
        RedisClient client = RedisClient.create(redis.uri());
        try (StatefulRedisConnection<String, String> c = client.connect()) {
            String acquire = c.sync().scriptLoad(BareLettuceLock.ACQUIRE);
            String release = c.sync().scriptLoad(BareLettuceLock.RELEASE);
            String[] acquireCommand = {"EVALSHA", acquire, "2", "limit{__rand_int__}", "limit{__rand_int__}:fence", "o", "30000"};
            String[] releaseCommand = {"EVALSHA", release, "1", "limit{__rand_int__}", "o"};
            double acquire1 = RedisLimit.requestsPerSecond(redis.host, redis.port, mode.limitRequests, 1, acquireCommand);
            double release1 = RedisLimit.requestsPerSecond(redis.host, redis.port, mode.limitRequests, 1, releaseCommand);
            double acquire16 = RedisLimit.requestsPerSecond(redis.host, redis.port, mode.limitRequests, 16, acquireCommand);
            c.sync().eval("for _, k in ipairs(redis.call('KEYS', 'limit{*')) do redis.call('DEL', k) end return 0",
                    io.lettuce.core.ScriptOutputType.INTEGER);
            return new Report.Limit(acquire1, release1, acquire16);
        } finally {
            client.shutdown();
        }
    }

    private static void cleanUp(String uri, String prefix) {
        RedisClient client = RedisClient.create(uri);
        try (StatefulRedisConnection<String, String> c = client.connect()) {
            // Redisson names its token counters "redisson_lock_token:{<lock name>}", so match the prefix anywhere.
            for (String key : c.sync().keys("*" + prefix + "*")) {
                c.sync().del(key);
            }
        } finally {
            client.shutdown();
        }
    }
}
