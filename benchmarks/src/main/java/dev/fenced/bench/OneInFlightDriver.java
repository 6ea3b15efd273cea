package dev.fenced.bench;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Issue 26's 1-in-flight breakdown: acquire + release pairs one at a time, Fenced and the bare lock (default and
 * with consolidated flushes) in the same JVM, interleaved round by round with the order rotated, after warm-up
 * rounds that are not reported. Per lock and round it reports pairs/s, p50/p99, and per pair: the CPU time of all
 * threads and the bytes they allocated (ThreadMXBean), and the voluntary context switches of every thread of the
 * process ({@code /proc/self/task/}*{@code /status}): each is a thread that parked and had to be woken, so their
 * count per pair, by thread, is the count of wake-ups (thread hops) a pair costs; and the server's side: the time
 * Redis spent executing the lock's requests ({@code usec} of {@code INFO commandstats}) and its CPU time
 * ({@code INFO cpu}), per pair. The next pair starts from the
 * previous release's reply, on the Lettuce event loop, as in the harness.
 *
 * <p>Run: {@code java -cp <benchmarks classpath> dev.fenced.bench.OneInFlightDriver [redisUri] [pairs] [rounds]
 * [fixed|distinct] [inFlight]}, with {@code -Ddriver.fencedOnly=true} to run Fenced alone, and
 * {@code -Ddriver.withoutLabel=true} to add Fenced without a holder label ({@code noHolderLabel()}) to the rounds.
 * A measurement, not a test: it asserts nothing. It deletes the keys of its prefix when done.
 */
final class OneInFlightDriver {

    private static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    private OneInFlightDriver() {
    }

    /**
     * Runs the rounds and prints one line per lock and round, then the medians.
     *
     * @param args the Redis URI, pairs per round, measured rounds, fixed or distinct names, and pairs in flight
     * @throws Exception on a failed round
     */
    public static void main(String[] args) throws Exception {
        String uri = args.length > 0 ? args[0] : "redis://127.0.0.1:6379";
        int pairs = args.length > 1 ? Integer.parseInt(args[1]) : 20_000;
        int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 5;
        boolean fixed = args.length <= 3 || args[3].equals("fixed");
        // Pairs in flight (1 by default); above 1 every pair has a name of its own, and wake-ups are per pair too.
        int inFlight = args.length > 4 ? Integer.parseInt(args[4]) : 1;
        if (inFlight > 1 && fixed) {
            throw new IllegalArgumentException("more than one pair in flight needs distinct names");
        }
        String prefix = "issue26-" + ProcessHandle.current().pid() + ":";
        THREADS.setThreadAllocatedMemoryEnabled(true);
        THREADS.setThreadCpuTimeEnabled(true);
        // -Ddriver.fencedOnly=true runs Fenced alone (for a profile of its own frames); -Ddriver.withoutLabel=true adds
        // Fenced without a holder label to the rounds (what the holder key costs).
        List<LockUnderTest> locks = new ArrayList<>(List.of(new FencedLock(uri, prefix + "f:")));
        if (Boolean.getBoolean("driver.withoutLabel")) {
            locks.add(FencedLock.withoutHolderLabel(uri, prefix + "n:"));
        }
        if (!Boolean.getBoolean("driver.fencedOnly")) {
            locks.add(new BareLettuceLock(uri, prefix + "b:", false));
            locks.add(new BareLettuceLock(uri, prefix + "c:", true));
        }
        Map<String, List<Row>> rows = new HashMap<>();
        try (RedisStats server = new RedisStats(uri)) {
            for (int round = -2; round < rounds; round++) {
                for (int i = 0; i < locks.size(); i++) {
                    LockUnderTest lock = locks.get(Math.floorMod(i + round, locks.size()));
                    Row row = measure(lock, round < 0 ? pairs / 2 : pairs, "r" + round, fixed, inFlight, server);
                    if (round >= 0) {
                        rows.computeIfAbsent(lock.label(), k -> new ArrayList<>()).add(row);
                        System.out.println(String.format(Locale.ROOT, "round %d %-32s %s", round, lock.label(), row));
                    }
                }
            }
            System.out.println("load: " + Files.readString(Path.of("/proc/loadavg")).trim() + "; names: "
                    + (fixed ? "fixed" : "distinct") + "; in flight " + inFlight + "; pairs per round " + pairs + "; medians of " + rounds + " rounds:");
            for (LockUnderTest lock : locks) {
                List<Row> mine = rows.get(lock.label());
                System.out.println(String.format(Locale.ROOT, "%-32s pairs/s %.0f  p50 %.1f µs  p99 %.1f µs  CPU %.1f µs"
                                + "  alloc %.0f B  wake-ups %.2f  Redis %.1f µs (CPU %.1f µs)", lock.label(),
                        median(mine, Row::pairsPerSecond), median(mine, Row::p50), median(mine, Row::p99),
                        median(mine, Row::cpuMicros), median(mine, Row::allocBytes), median(mine, Row::wakeUps),
                        median(mine, Row::redisMicros), median(mine, Row::redisCpuMicros)));
            }
        } finally {
            for (LockUnderTest lock : locks) {
                lock.close();
            }
            cleanUp(uri, prefix);
        }
    }

    private static Row measure(LockUnderTest lock, int pairs, String round, boolean fixed, int inFlight,
            RedisStats server) throws IOException {
        Latencies latencies = new Latencies(pairs);
        long redisBefore = server.requestMicros();
        double redisCpuBefore = server.cpuSeconds();
        Map<String, Long> switchesBefore = switchesByThread();
        long cpuBefore = cpuNanos();
        long allocBefore = allocatedBytes();
        long start = System.nanoTime();
        Flux.range(0, pairs)
                .flatMap(i -> Mono.defer(() -> {
                    long t0 = System.nanoTime();
                    return lock.pair(fixed ? round : round + "-" + i)
                            .doOnSuccess(v -> latencies.record(System.nanoTime() - t0));
                }), inFlight)
                .blockLast(Duration.ofMinutes(10));
        double seconds = (System.nanoTime() - start) / 1e9;
        long cpu = cpuNanos() - cpuBefore;
        double redisMicros = (double) (server.requestMicros() - redisBefore) / pairs;
        double redisCpuMicros = (server.cpuSeconds() - redisCpuBefore) * 1e6 / pairs;
        long alloc = allocatedBytes() - allocBefore;
        Map<String, Long> switches = switchesByThread();
        Map<String, Double> perThread = new TreeMap<>();
        double total = 0;
        for (Map.Entry<String, Long> e : switches.entrySet()) {
            long delta = e.getValue() - switchesBefore.getOrDefault(e.getKey(), 0L);
            if (delta > pairs / 100) {
                perThread.put(e.getKey(), (double) delta / pairs);
            }
            total += delta;
        }
        return new Row(pairs / seconds, latencies.percentileMicros(50), latencies.percentileMicros(99),
                cpu / 1e3 / pairs, (double) alloc / pairs, total / pairs, redisMicros, redisCpuMicros, perThread);
    }

    /** CPU time of every live thread (threads that ended during a round are missed; none should). */
    private static long cpuNanos() {
        long sum = 0;
        for (long id : THREADS.getAllThreadIds()) {
            long t = THREADS.getThreadCpuTime(id);
            if (t > 0) {
                sum += t;
            }
        }
        return sum;
    }

    private static long allocatedBytes() {
        long sum = 0;
        for (long bytes : THREADS.getThreadAllocatedBytes(THREADS.getAllThreadIds())) {
            if (bytes > 0) {
                sum += bytes;
            }
        }
        return sum;
    }

    /** Voluntary context switches per native thread, keyed by its name (with its id, names repeat). */
    private static Map<String, Long> switchesByThread() throws IOException {
        Map<String, Long> switches = new HashMap<>();
        try (Stream<Path> tasks = Files.list(Path.of("/proc/self/task"))) {
            for (Path task : (Iterable<Path>) tasks::iterator) {
                try {
                    String name = Files.readString(task.resolve("comm")).trim();
                    for (String line : Files.readAllLines(task.resolve("status"))) {
                        if (line.startsWith("voluntary_ctxt_switches:")) {
                            switches.put(name + "#" + task.getFileName(), Long.parseLong(line.substring(24).trim()));
                        }
                    }
                } catch (IOException ended) {
                    // The thread ended while listed.
                }
            }
        }
        return switches;
    }

    private static double median(List<Row> rows, java.util.function.ToDoubleFunction<Row> value) {
        double[] values = rows.stream().mapToDouble(value).sorted().toArray();
        return values[values.length / 2];
    }

    /** Deletes the keys under {@code prefix} (a driver's own), as drivers do when done. */
    static void cleanUp(String uri, String prefix) {
        io.lettuce.core.RedisClient client = io.lettuce.core.RedisClient.create(uri);
        try (var connection = client.connect()) {
            var sync = connection.sync();
            io.lettuce.core.ScanArgs match = io.lettuce.core.ScanArgs.Builder.matches(prefix + "*").limit(1000);
            io.lettuce.core.KeyScanCursor<String> cursor = sync.scan(match);
            while (true) {
                if (!cursor.getKeys().isEmpty()) {
                    sync.unlink(cursor.getKeys().toArray(new String[0]));
                }
                if (cursor.isFinished()) {
                    break;
                }
                cursor = sync.scan(cursor, match);
            }
        } finally {
            client.shutdown();
        }
    }

    private record Row(double pairsPerSecond, double p50, double p99, double cpuMicros, double allocBytes,
            double wakeUps, double redisMicros, double redisCpuMicros, Map<String, Double> wakeUpsByThread) {

        @Override
        public String toString() {
            StringBuilder threads = new StringBuilder();
            perThread(threads);
            return String.format(Locale.ROOT, "pairs/s %.0f p50 %.1f p99 %.1f CPU %.1f µs alloc %.0f B wake-ups %.2f"
                    + " Redis %.1f µs (CPU %.1f µs) [%s]", pairsPerSecond, p50, p99, cpuMicros, allocBytes, wakeUps,
                    redisMicros, redisCpuMicros, threads);
        }

        private void perThread(StringBuilder out) {
            wakeUpsByThread.forEach((thread, n) -> out.append(thread).append('=')
                    .append(String.format(Locale.ROOT, "%.2f", n)).append(' '));
        }
    }
}
