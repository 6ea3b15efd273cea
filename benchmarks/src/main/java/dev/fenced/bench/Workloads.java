package dev.fenced.bench;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** The measured workloads. Each returns plain numbers; {@link Report} turns them into tables. */
final class Workloads {

    private Workloads() {
    }

    /** Uncontended acquire+release pairs on distinct names. */
    record Uncontended(String lock, int inFlight, int pairs, double pairsPerSecond, double p50Micros, double p99Micros) {
    }

    static Uncontended uncontended(LockUnderTest lock, int inFlight, int pairs, String round) {
        Latencies latencies = new Latencies(pairs);
        long start = System.nanoTime();
        Flux.range(0, pairs)
                .flatMap(i -> Mono.defer(() -> {
                    long t0 = System.nanoTime();
                    return lock.pair(round + "-" + i).doOnSuccess(v -> latencies.record(System.nanoTime() - t0));
                }), inFlight)
                .blockLast(Duration.ofMinutes(10));
        double seconds = (System.nanoTime() - start) / 1e9;
        return new Uncontended(lock.label(), inFlight, pairs, pairs / seconds, latencies.percentileMicros(50),
                latencies.percentileMicros(99));
    }

    /** Many workers contending for one lock name through one client. */
    record Contended(int workers, double seconds, long acquisitions, long handoffs, double handoffsPerSecond,
            double requestsPerAcquire, double commandsPerAcquire, double ownerChangeShare, double waitP50Micros,
            double waitP99Micros) {
    }

    static Contended contended(FencedLockClient client, RedisStats stats, int workers, Duration duration) {
        AtomicInteger lastHolder = new AtomicInteger(-1);
        AtomicLong acquisitions = new AtomicLong();
        AtomicLong handoffs = new AtomicLong();
        Latencies waits = new Latencies(2_000_000);
        long deadline = System.nanoTime() + duration.toNanos();
        long callsBefore = stats.totalCalls();
        java.util.Map<String, Long> byCommandBefore = stats.callsByCommand();
        long start = System.nanoTime();
        Flux.range(0, workers)
                .flatMap(worker -> Mono.defer(() -> {
                            long t0 = System.nanoTime();
                            return client.acquire("contended", AcquireOptions.defaults().withMaxWait(Duration.ofSeconds(30)))
                                    .flatMap(lease -> {
                                        waits.record(System.nanoTime() - t0);
                                        acquisitions.incrementAndGet();
                                        if (lastHolder.getAndSet(worker) != worker) {
                                            handoffs.incrementAndGet();
                                        }
                                        return lease.release();
                                    });
                        })
                        .repeat(() -> System.nanoTime() < deadline), workers)
                .blockLast(duration.plusMinutes(2));
        double seconds = (System.nanoTime() - start) / 1e9;
        long calls = stats.totalCalls() - callsBefore;
        long requests = RedisStats.requests(byCommandBefore, stats.callsByCommand());
        long acquired = acquisitions.get();
        return new Contended(workers, seconds, acquired, handoffs.get(), handoffs.get() / seconds,
                acquired == 0 ? -1 : (double) requests / acquired, acquired == 0 ? -1 : (double) calls / acquired, acquired == 0 ? 0 : (double) handoffs.get() / acquired,
                waits.percentileMicros(50), waits.percentileMicros(99));
    }

    /** Many leases held, and renewed, at once. */
    record Held(int leases, double seconds, double renewalRoundTripsPerSecond, double commandsPerSecond,
            int threadsAdded, double heapBytesPerLease) {
    }

    static Held held(String redisUri, String prefix, RedisStats stats, int count, Duration leaseTime, Duration duration) {
        int threadsBefore = Thread.activeCount();
        long heapBefore = usedHeapAfterGc();
        FencedLockClient client = FencedLockClient.builder().redisUri(redisUri).keyPrefix(prefix).leaseTime(leaseTime).build();
        try {
            List<FencedLease> leases = Flux.range(0, count)
                    .flatMap(i -> client.acquire("held-" + i, AcquireOptions.tryOnce()), 256)
                    .collectList()
                    .block(Duration.ofMinutes(5));
            if (leases == null || leases.size() != count) {
                throw new IllegalStateException("Expected " + count + " leases, got " + (leases == null ? 0 : leases.size()));
            }
            long heapHeld = usedHeapAfterGc();
            int threadsHeld = Thread.activeCount();
            long callsBefore = stats.totalCalls();
            java.util.Map<String, Long> byCommandBefore = stats.callsByCommand();
            long start = System.nanoTime();
            sleep(duration);
            java.util.Map<String, Long> byCommandAfter = stats.callsByCommand();
            double seconds = (System.nanoTime() - start) / 1e9;
            long calls = stats.totalCalls() - callsBefore;
            long lost = leases.stream().filter(l -> !l.isHeld()).count();
            if (lost > 0) {
                throw new IllegalStateException(lost + " of " + count + " held leases were lost while held");
            }
            Flux.fromIterable(leases).flatMap(FencedLease::release, 256).blockLast(Duration.ofMinutes(5));
            long requests = RedisStats.requests(byCommandBefore, byCommandAfter);
            return new Held(count, seconds, requests / seconds, calls / seconds, threadsHeld - threadsBefore,
                    (double) (heapHeld - heapBefore) / count);
        } finally {
            client.close();
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
}
