package dev.fenced.bench;

import dev.fenced.lock.PostgresLeaseTable;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * A driver of its own for the PostgreSQL store's shared statements: Fenced on PostgreSQL with every acquire and
 * release a statement of its own (the store's system property {@code dev.fenced.postgres.batching} set to
 * {@code false}) against Fenced with shared statements (the default since 2026-12-06; the property set to
 * {@code true}), on one pool and one lease table, in one run: uncontended pairs at 1 and 64 in flight, rounds
 * alternating which client goes first, then the contended loop of each. Prints one line a result, with the
 * statements per pair (connections the store took from the pool). Arguments: rounds (default 5), pairs a round
 * (default 4000), contended seconds (default 5).
 */
public final class PostgresSharing {

    private static final String BATCHING = "dev.fenced.postgres.batching";

    private PostgresSharing() {
    }

    /**
     * Runs the comparison and prints it.
     *
     * @param args rounds, pairs a round, contended seconds
     */
    public static void main(String[] args) {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 5;
        int pairs = args.length > 1 ? Integer.parseInt(args[1]) : 4000;
        Duration contention = Duration.ofSeconds(args.length > 2 ? Integer.parseInt(args[2]) : 5);
        try (BenchPostgres db = BenchPostgres.start(0)) {
            PostgresLeaseTable table = PostgresLeaseTable.named(db.table.replace("bench_accounts_", "bench_share_"));
            table.create(db.connections).block(Duration.ofSeconds(30));
            CountingConnections ownCounts = new CountingConnections(db.connections);
            CountingConnections sharedCounts = new CountingConnections(db.connections);
            System.setProperty(BATCHING, "false");
            FencedLock own = FencedLock.onPostgres(ownCounts, table, "own:");
            System.setProperty(BATCHING, "true");
            FencedLock shared = FencedLock.onPostgres(sharedCounts, table, "shared:");
            System.clearProperty(BATCHING);
            try {
                List<FencedLock> locks = List.of(own, shared);
                List<CountingConnections> counts = List.of(ownCounts, sharedCounts);
                List<String> labels = List.of("one statement each", "shared statements");
                for (int inFlight : new int[] {1, 64}) {
                    int n = inFlight == 1 ? pairs / 4 : pairs;
                    List<List<double[]>> results = List.of(new ArrayList<>(), new ArrayList<>());
                    for (int round = -1; round < rounds; round++) {
                        for (int k = 0; k < 2; k++) {
                            int which = (Math.max(round, 0) + k) % 2;
                            long before = counts.get(which).requests();
                            Workloads.Uncontended u = Workloads.uncontended(locks.get(which), inFlight, n,
                                    "r" + round + "-" + inFlight, counts.get(which), false);
                            double statements = (double) (counts.get(which).requests() - before) / u.pairs();
                            if (round >= 0) {
                                results.get(which).add(new double[] {u.pairsPerSecond(), u.p50Micros(), u.p99Micros(),
                                        u.clientCpuMicros(), statements});
                            }
                        }
                    }
                    for (int which = 0; which < 2; which++) {
                        List<double[]> own0 = results.get(which);
                        own0.sort((a, b) -> Double.compare(a[0], b[0]));
                        double[] m = own0.get(own0.size() / 2);
                        System.out.printf(Locale.ROOT, "pairs %-20s in flight %3d: %8.0f pairs/s (min %.0f, max %.0f) p50 %7.0f us"
                                        + " p99 %7.0f us, client CPU %5.0f us/pair, %.2f statements/pair%n",
                                labels.get(which), inFlight, m[0], own0.get(0)[0], own0.get(own0.size() - 1)[0], m[1], m[2], m[3], m[4]);
                    }
                }
                for (int which = 0; which < 2; which++) {
                    Workloads.Contended c = Workloads.contended(locks.get(which), counts.get(which), 64, contention);
                    System.out.printf(Locale.ROOT, "contended %-20s: %8.0f hand-offs/s, %d acquisitions, %.2f statements/acquire,"
                                    + " wait p50 %.0f us%n", labels.get(which), c.handoffsPerSecond(), c.acquisitions(),
                            c.requestsPerAcquire(), c.waitP50Micros());
                }
            } finally {
                own.close();
                shared.close();
                db.execute("DROP TABLE IF EXISTS " + table.name());
            }
        }
    }
}
