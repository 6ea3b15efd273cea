package dev.fenced.bench;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.PostgresLeaseTable;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** Fenced, used as an application would: acquire (default options), then release. */
final class FencedLock implements WaitingLock {

    /** The label of Fenced on PostgreSQL in result tables. */
    static final String ON_POSTGRES = "Fenced on PostgreSQL";

    private final FencedLockClient client;
    private final String label;

    FencedLock(String redisUri, String prefix) {
        this(FencedLockClient.builder().redisUri(redisUri).keyPrefix(prefix).build(), "Fenced");
    }

    private FencedLock(FencedLockClient client, String label) {
        this.client = client;
        this.label = label;
    }

    /**
     * Fenced on Redis without a holder label ({@code noHolderLabel()}): its grants write the lock and its token
     * counter only, not the holder key; for the cost of that key.
     *
     * @param redisUri the Redis URI
     * @param prefix the key prefix
     * @return the lock
     */
    static FencedLock withoutHolderLabel(String redisUri, String prefix) {
        return new FencedLock(FencedLockClient.builder().redisUri(redisUri).keyPrefix(prefix).noHolderLabel().build(),
                "Fenced, no holder label");
    }

    /**
     * Fenced with its leases in PostgreSQL, default settings otherwise.
     *
     * @param connections the pool
     * @param table the lease table
     * @param prefix the key prefix
     * @return the lock
     */
    static FencedLock onPostgres(ConnectionFactory connections, PostgresLeaseTable table, String prefix) {
        return new FencedLock(FencedLockClient.builder().postgres(connections, table).keyPrefix(prefix).build(), ON_POSTGRES);
    }

    FencedLockClient client() {
        return client;
    }

    @Override
    public String label() {
        return label;
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
        return new Held(FencedLockClient.builder().redisUri(redisUri).keyPrefix(prefix).leaseTime(leaseTime).build(), "Fenced");
    }

    /**
     * Fenced leases held with renewal on PostgreSQL, on a client of their own.
     *
     * @param connections the pool
     * @param table the lease table
     * @param prefix the key prefix
     * @param leaseTime the lease time, renewed every third of it
     * @return the holder
     */
    static HeldLeases heldOnPostgres(ConnectionFactory connections, PostgresLeaseTable table, String prefix, Duration leaseTime) {
        return new Held(FencedLockClient.builder().postgres(connections, table).keyPrefix(prefix).leaseTime(leaseTime).build(),
                ON_POSTGRES);
    }

    private static final class Held implements HeldLeases {

        private final FencedLockClient client;
        private final String label;
        private final Queue<FencedLease> leases = new ConcurrentLinkedQueue<>();

        Held(FencedLockClient client, String label) {
            this.client = client;
            this.label = label;
        }

        @Override
        public String label() {
            return label;
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
