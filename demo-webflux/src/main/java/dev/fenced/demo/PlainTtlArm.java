package dev.fenced.demo;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.codec.StringCodec;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Result;
import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The scenario without fencing, as the seed did it: a plain TTL lock ({@code SET key owner NX PX ttl}, released by
 * a compare-and-delete script) and an unguarded {@code UPDATE}. Nothing tells a paused holder that its lock expired,
 * and nothing stops its late write. Its keys are {@code <prefix>plain:<name>}, apart from Fenced's.
 */
final class PlainTtlArm implements ScenarioArm {

    private static final String RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then "
            + "return redis.call('del', KEYS[1]) else return 0 end";
    private static final Duration RETRY = Duration.ofMillis(50);
    private static final String UPDATE = "UPDATE invoices SET status = 'PROCESSED', ledger_total = $1, "
            + "times_processed = $2, processed_by = $3 WHERE id = $4";

    private final RedisClient client = RedisClient.create();
    private final RedisURI applicationRedis;
    private final String keyPrefix;
    private final Duration workerBLease;

    PlainTtlArm(RedisURI applicationRedis, String keyPrefix, Duration workerBLease) {
        this.applicationRedis = applicationRedis;
        this.keyPrefix = keyPrefix + "plain:";
        this.workerBLease = workerBLease;
    }

    @Override
    public boolean fencing() {
        return false;
    }

    @Override
    public Mono<Locks> workerA(RedisURI viaRelay, Duration leaseTime) {
        return Mono.just(new PlainLocks(viaRelay, leaseTime, ScenarioService.WORKER_A));
    }

    @Override
    public Locks workerB() {
        return new PlainLocks(applicationRedis, workerBLease, ScenarioService.WORKER_B);
    }

    @Override
    public Mono<Long> write(Connection connection, Held held, Invoice seen, String worker) {
        return Flux.from(connection.createStatement(UPDATE)
                        .bind(0, seen.ledgerTotal() + seen.amount())
                        .bind(1, seen.timesProcessed() + 1)
                        .bind(2, worker)
                        .bind(3, seen.id())
                        .execute())
                .flatMap(Result::getRowsUpdated)
                .reduce(0L, Long::sum);
    }

    /** Closes the Redis client; the application calls this when it stops. */
    void shutdown() {
        client.shutdown(0, 2, TimeUnit.SECONDS);
    }

    /** One worker's connection, opened on first use, and its owner value. */
    private final class PlainLocks implements Locks {

        private final Duration ttl;
        private final String owner;
        private final Mono<StatefulRedisConnection<String, String>> connection;
        private volatile @Nullable StatefulRedisConnection<String, String> opened;

        PlainLocks(RedisURI uri, Duration ttl, String worker) {
            this.ttl = ttl;
            // The owner only has to differ between the two workers; no SecureRandom on an event loop.
            this.owner = worker + ":" + Long.toHexString(ThreadLocalRandom.current().nextLong());
            this.connection = Mono.fromCompletionStage(() -> client.connectAsync(StringCodec.UTF8, uri))
                    .doOnNext(c -> opened = c)
                    .cache();
        }

        @Override
        public Mono<Held> acquire(String name, Duration maxWait) {
            String key = keyPrefix + name;
            return connection.flatMap(c -> Mono.defer(() -> c.reactive().set(key, owner, SetArgs.Builder.nx().px(ttl)))
                            .filter("OK"::equals)
                            .repeatWhenEmpty(attempts -> attempts.delayElements(RETRY))
                            .timeout(maxWait)
                            .thenReturn(new PlainHeld(c, key, owner, ttl)));
        }

        @Override
        public Mono<Void> close() {
            StatefulRedisConnection<String, String> current = opened;
            return current == null ? Mono.empty() : Mono.fromCompletionStage(current::closeAsync);
        }
    }

    private record PlainHeld(StatefulRedisConnection<String, String> connection, String key, String owner,
            Duration ttl) implements Held {

        @Override
        public @Nullable Long token() {
            return null;
        }

        @Override
        public String grant() {
            return "with SET " + key + " NX PX " + ttl.toMillis() + ", which gives no token";
        }

        @Override
        public String beliefBeforeWrite() {
            return "it believes it still holds the lock: a plain TTL lock has no deadline on the client and no way "
                    + "to learn that the key expired";
        }

        @Override
        public Mono<String> lost() {
            return Mono.never();
        }

        @Override
        public Mono<String> release() {
            return connection.reactive().<Long>eval(RELEASE, ScriptOutputType.INTEGER, new String[] {key}, owner)
                    .next()
                    .map(deleted -> deleted == 1 ? "releases the lock (deleted its key)" : "releases the lock (its key "
                            + "was gone)");
        }
    }
}
