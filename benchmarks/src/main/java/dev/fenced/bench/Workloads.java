package dev.fenced.bench;

import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** The measured workloads. Each returns plain numbers; {@link Report} turns them into tables. */
final class Workloads {

    private Workloads() {
    }

    /**
     * Uncontended acquire+release pairs: on distinct names, or on a fixed name per worker (each of the
     * {@code inFlight} workers repeats its pairs on one name of its own).
     *
     * @param clientCpuMicros CPU time of the whole JVM per pair (every thread: the lock's, the JIT's, the
     *        collector's, the idle peers')
     * @param serverCpuMicros CPU time of the server per pair, negative when it cannot be read
     */
    record Uncontended(String lock, int inFlight, int pairs, double pairsPerSecond, double p50Micros, double p99Micros,
            double clientCpuMicros, double serverCpuMicros) {
    }

    static Uncontended uncontended(LockUnderTest lock, int inFlight, int pairs, String round, ServerCounters server,
            boolean fixedNames) {
        Latencies latencies = new Latencies(pairs);
        double serverCpuBefore = server.cpuSeconds();
        long cpuBefore = processCpuNanos();
        long start = System.nanoTime();
        if (fixedNames) {
            // inFlight workers, each repeating pairs on a name of its own.
            int perWorker = pairs / inFlight;
            Flux.range(0, inFlight)
                    .flatMap(worker -> Mono.defer(() -> {
                        long t0 = System.nanoTime();
                        return lock.pair(round + "-w" + worker).doOnSuccess(v -> latencies.record(System.nanoTime() - t0));
                    }).repeat(perWorker - 1), inFlight)
                    .blockLast(Duration.ofMinutes(10));
            pairs = perWorker * inFlight;
        } else {
            Flux.range(0, pairs)
                    .flatMap(i -> Mono.defer(() -> {
                        long t0 = System.nanoTime();
                        return lock.pair(round + "-" + i).doOnSuccess(v -> latencies.record(System.nanoTime() - t0));
                    }), inFlight)
                    .blockLast(Duration.ofMinutes(10));
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        double clientCpu = (processCpuNanos() - cpuBefore) / 1e3 / pairs;
        double serverCpuAfter = server.cpuSeconds();
        double serverCpu = serverCpuBefore < 0 || serverCpuAfter < 0 ? -1 : (serverCpuAfter - serverCpuBefore) * 1e6 / pairs;
        return new Uncontended(lock.label(), inFlight, pairs, pairs / seconds, latencies.percentileMicros(50),
                latencies.percentileMicros(99), clientCpu, serverCpu);
    }

    /** CPU time of this JVM so far, every thread. */
    private static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
    }

    /** Many workers contending for one lock name through one client. */
    record Contended(String lock, int workers, double seconds, long acquisitions, long handoffs, double handoffsPerSecond,
            double requestsPerAcquire, double commandsPerAcquire, double ownerChangeShare, double waitP50Micros,
            double waitP99Micros) {
    }

    static Contended contended(WaitingLock lock, ServerCounters stats, int workers, Duration duration) {
        AtomicInteger lastHolder = new AtomicInteger(-1);
        AtomicLong acquisitions = new AtomicLong();
        AtomicLong handoffs = new AtomicLong();
        Latencies waits = new Latencies(2_000_000);
        long deadline = System.nanoTime() + duration.toNanos();
        long callsBefore = stats.commands();
        long requestsBefore = stats.requests();
        long start = System.nanoTime();
        Flux.range(0, workers)
                .flatMap(worker -> Mono.defer(() -> {
                            long t0 = System.nanoTime();
                            return lock.acquireWaitingThenRelease("contended", Duration.ofSeconds(30), () -> {
                                waits.record(System.nanoTime() - t0);
                                acquisitions.incrementAndGet();
                                if (lastHolder.getAndSet(worker) != worker) {
                                    handoffs.incrementAndGet();
                                }
                            });
                        })
                        .repeat(() -> System.nanoTime() < deadline), workers)
                .blockLast(duration.plusMinutes(2));
        double seconds = (System.nanoTime() - start) / 1e9;
        long calls = stats.commands() - callsBefore;
        long requests = stats.requests() - requestsBefore;
        long acquired = acquisitions.get();
        return new Contended(lock.label(), workers, seconds, acquired, handoffs.get(), handoffs.get() / seconds,
                acquired == 0 ? -1 : (double) requests / acquired, acquired == 0 ? -1 : (double) calls / acquired,
                acquired == 0 ? 0 : (double) handoffs.get() / acquired, waits.percentileMicros(50), waits.percentileMicros(99));
    }

    /**
     * Ticks of a scheduled job: one tick after another on one job name (an empty task under the lock, at most for
     * 30 s, at least for 0), as a scheduler runs them.
     *
     * @param requestsPerTick round trips to Redis per tick (the lock's own request commands)
     * @param commandsPerTick commands Redis executed per tick, including those inside scripts
     */
    record Ticks(String lock, int ticks, double ticksPerSecond, double meanMicros, double p50Micros, double p99Micros,
            double requestsPerTick, double commandsPerTick) {
    }

    static Ticks ticks(ScheduledJobLock lock, RedisStats stats, int ticks, String job) {
        Latencies latencies = new Latencies(ticks);
        Map<String, Long> before = stats.callsByCommand();
        long commandsBefore = stats.totalCalls();
        long start = System.nanoTime();
        for (int i = 0; i < ticks; i++) {
            long t0 = System.nanoTime();
            if (!lock.tick(job)) {
                throw BenchmarkException.notAcquired(lock.label(), job);
            }
            latencies.record(System.nanoTime() - t0);
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        long commands = stats.totalCalls() - commandsBefore;
        Map<String, Long> after = stats.callsByCommand();
        long requests = 0;
        for (String command : lock.requestCommands()) {
            requests += after.getOrDefault(command, 0L) - before.getOrDefault(command, 0L);
        }
        return new Ticks(lock.label(), ticks, ticks / seconds, seconds * 1e6 / ticks, latencies.percentileMicros(50),
                latencies.percentileMicros(99), (double) requests / ticks, (double) commands / ticks);
    }

    /** Many leases held, and renewed, at once. */
    record Held(String lock, int leases, double seconds, double renewalRoundTripsPerSecond, double commandsPerSecond,
            int threadsAdded, double heapBytesPerLease) {
    }

    /**
     * Opens a client, takes {@code count} leases, holds them for {@code duration} while the client renews them,
     * then releases them. The threads and heap the client adds are measured from before it was opened.
     */
    static Held held(Supplier<HeldLeases> open, ServerCounters stats, int count, Duration duration) {
        int threadsBefore = Thread.activeCount();
        long heapBefore = usedHeapAfterGc();
        try (HeldLeases client = open.get()) {
            Flux.range(0, count).flatMap(i -> client.acquire("held-" + i), 256).blockLast(Duration.ofMinutes(5));
            long heapHeld = usedHeapAfterGc();
            int threadsHeld = Thread.activeCount();
            long callsBefore = stats.commands();
            long requestsBefore = stats.requests();
            long start = System.nanoTime();
            sleep(duration);
            long requests = stats.requests() - requestsBefore;
            double seconds = (System.nanoTime() - start) / 1e9;
            long calls = stats.commands() - callsBefore;
            Long lost = client.countLost().block(Duration.ofMinutes(5));
            if (lost == null || lost > 0) {
                throw BenchmarkException.leasesLost(client.label(), lost == null ? count : lost, count);
            }
            client.releaseAll().block(Duration.ofMinutes(5));
            return new Held(client.label(), count, seconds, requests / seconds, calls / seconds, threadsHeld - threadsBefore,
                    (double) (heapHeld - heapBefore) / count);
        }
    }

    private static long usedHeapAfterGc() {
        for (int i = 0; i < 3; i++) {
            System.gc();
            sleep(Duration.ofMillis(50));
        }
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
    }

    static void sleep(Duration duration) {
        try {
            Thread.sleep(duration.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /**
     * The fleet view: the time to list every lock held under one prefix, through another client (an operator's),
     * once the holder holds {@code locks} of them (acquired first, kept reachable, released at the end).
     *
     * @param store where the locks are, for the report
     * @param locks how many locks are held
     * @param totalMillis the median time to list them all, in milliseconds
     * @param millisPer10k the same per 10,000 locks
     */
    record Fleet(String store, int locks, double totalMillis, double millisPer10k) {
    }

    static Fleet fleet(String store, dev.fenced.lock.FencedLockClient holder, dev.fenced.lock.FencedLockClient viewer,
            int locks, int warmups, int rounds) {
        java.util.List<dev.fenced.lock.FencedLease> held = Flux.range(0, locks)
                .flatMap(i -> holder.tryAcquire("fleet-" + i), 128)
                .collectList()
                .block(Duration.ofMinutes(20));
        if (held == null || held.size() != locks) {
            throw BenchmarkException.tooFewLeases("Fenced fleet view on " + store, locks, held == null ? 0 : held.size());
        }
        java.util.List<Double> times = new java.util.ArrayList<>();
        for (int round = 0; round < warmups + rounds; round++) {
            long start = System.nanoTime();
            Long listed = viewer.locks("fleet-*").count().block(Duration.ofMinutes(10));
            double millis = (System.nanoTime() - start) / 1e6;
            if (listed == null || listed != locks) {
                throw BenchmarkException.listedWrongly(store, locks, listed == null ? 0 : listed);
            }
            if (round >= warmups) {
                times.add(millis);
            }
        }
        Flux.fromIterable(held).flatMap(dev.fenced.lock.FencedLease::release, 256).then().block(Duration.ofMinutes(20));
        java.util.Collections.sort(times);
        double median = times.get(times.size() / 2);
        return new Fleet(store, locks, median, median * 10_000 / locks);
    }
}
