package dev.fenced.bench;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import java.time.Duration;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** Fenced, used as an application would: acquire (default options), then release. */
final class FencedLock implements WaitingLock {

    private final FencedLockClient client;

    FencedLock(String redisUri, String prefix) {
        this.client = FencedLockClient.builder().redisUri(redisUri).keyPrefix(prefix).build();
    }

    FencedLockClient client() {
        return client;
    }

    @Override
    public String label() {
        return "Fenced";
    }

    @Override
    public Mono<Void> pair(String name) {
        return client.acquire(name).flatMap(FencedLease::release).then();
    }

    @Override
    public Mono<Void> acquireWaitingThenRelease(String name, Duration maxWait, Runnable whileHeld) {
        return client.acquire(name, AcquireOptions.defaults().withMaxWait(maxWait))
                .flatMap(lease -> {
                    whileHeld.run();
                    return lease.release();
                })
                .then();
    }

    /**
     * Fenced leases held with renewal, on a client of their own.
     *
     * @param redisUri the server
     * @param prefix the key prefix
     * @param leaseTime the lease time, renewed every third of it
     * @return the holder
     */
    static HeldLeases held(String redisUri, String prefix, Duration leaseTime) {
        return new Held(FencedLockClient.builder().redisUri(redisUri).keyPrefix(prefix).leaseTime(leaseTime).build());
    }

    private static final class Held implements HeldLeases {

        private final FencedLockClient client;
        private final Queue<FencedLease> leases = new ConcurrentLinkedQueue<>();

        Held(FencedLockClient client) {
            this.client = client;
        }

        @Override
        public String label() {
            return "Fenced";
        }

        @Override
        public Mono<Void> acquire(String name) {
            return client.acquire(name, AcquireOptions.tryOnce())
                    .switchIfEmpty(Mono.error(() -> BenchmarkException.notAcquired(label(), name)))
                    .doOnNext(leases::add)
                    .then();
        }

        @Override
        public Mono<Long> countLost() {
            return Mono.fromSupplier(() -> leases.stream().filter(l -> !l.isHeld()).count());
        }

        @Override
        public Mono<Void> releaseAll() {
            return Flux.fromIterable(List.copyOf(leases)).flatMap(FencedLease::release, 256).then();
        }

        @Override
        public void close() {
            client.close();
        }
    }

    @Override
    public void close() {
        client.close();
    }
}
