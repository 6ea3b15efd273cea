package dev.fenced.torture;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.FencedLockClientBuilder;
import dev.fenced.lock.PostgresLeaseTable;
import dev.fenced.lock.ReleaseOutcome;
import dev.fenced.lock.TokenScheme;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.postgresql.PostgresqlConnectionFactoryProvider;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactoryOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * How one worker takes locks: with the library, or with the plain TTL lock of the control arm. Each worker has
 * its own locker (its own client, connections and renewal thread), reaching the lock service (Redis, or the
 * PostgreSQL lease table) through its own proxy, so that a fault can hit one worker and not the others. Blocking:
 * used from the worker's thread.
 */
interface Locker extends AutoCloseable {

    /**
     * Takes the lock on {@code resource}, waiting for it if held.
     *
     * @throws AcquireFailedException if it could not within the maximum wait, or the lock service failed
     */
    Grant acquire(String resource);

    /**
     * Stalls the worker for {@code millis} like a stop-the-world pause: the locker's renewal thread is
     * frozen for the same time, so renewals and loss timers cannot run. Returns when both are thawed.
     */
    void pause(long millis) throws InterruptedException;

    @Override
    void close();

    static Locker create(Arm arm, Endpoint endpoint, String prefix, Duration leaseTime, Duration maxWait, String name) {
        if (arm != Arm.PLAIN_TTL) {
            return new Fenced(endpoint, prefix, leaseTime, maxWait, arm.tokenScheme(), name);
        }
        if (endpoint instanceof RedisEndpoint redis) {
            return new Plain(redis.uri(), prefix, leaseTime, maxWait);
        }
        throw new IllegalArgumentException("The plain TTL lock of the control arm runs on Redis only, not on " + endpoint);
    }

    /**
     * Where a lock client connects: Redis, or a PostgreSQL lease table. Encoded as one string for the child JVM's
     * command line.
     */
    sealed interface Endpoint permits RedisEndpoint, PostgresEndpoint {

        /**
         * Points {@code builder} at the service; returns what must be closed once the client built from it is closed
         * (the connection pool a PostgreSQL client uses, which the client never closes).
         */
        AutoCloseable configure(FencedLockClientBuilder builder);

        /** One string for a command line; {@link #decode} reads it back. */
        String encode();

        static Endpoint decode(String encoded) {
            String[] parts = encoded.split("\\|", 5);
            return switch (parts[0]) {
                case "redis" -> new RedisEndpoint(parts[1]);
                case "postgres" -> new PostgresEndpoint(parts[4], parts[2], Integer.parseInt(parts[3]), parts[1]);
                default -> throw new IllegalArgumentException("Not an encoded endpoint: " + encoded);
            };
        }
    }

    /** Redis at {@code uri}. */
    record RedisEndpoint(String uri) implements Endpoint {

        @Override
        public AutoCloseable configure(FencedLockClientBuilder builder) {
            builder.redisUri(uri);
            return () -> { };
        }

        @Override
        public String encode() {
            return "redis|" + uri;
        }
    }

    /**
     * The lease table {@code table} of the database at {@code databaseUrl} (an R2DBC URL with credentials), reached at
     * {@code host:port} (a proxy) instead of the URL's address. Each client gets a small pool of its own. Its
     * connections cache no prepared statements, so every statement sends its SQL text and a proxy can tell an acquire
     * from the rest ({@link PostgresTopology#acquireMarker()}); nothing else of the store depends on that cache.
     */
    record PostgresEndpoint(String databaseUrl, String host, int port, String table) implements Endpoint {

        @Override
        public AutoCloseable configure(FencedLockClientBuilder builder) {
            ConnectionFactoryOptions options = ConnectionFactoryOptions.parse(databaseUrl).mutate()
                    .option(ConnectionFactoryOptions.HOST, host)
                    .option(ConnectionFactoryOptions.PORT, port)
                    .option(PostgresqlConnectionFactoryProvider.PREPARED_STATEMENT_CACHE_QUERIES, 0)
                    .build();
            ConnectionPool pool = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(options))
                    .initialSize(1).maxSize(4).build());
            builder.postgres(pool, PostgresLeaseTable.named(table));
            return () -> pool.disposeLater().onErrorResume(e -> Mono.empty())
                    .block(Duration.ofSeconds(10));
        }

        @Override
        public String encode() {
            // An R2DBC URL is percent-encoded: it holds no '|'.
            return "postgres|" + table + "|" + host + "|" + port + "|" + databaseUrl;
        }

        /** Without the URL, which may hold a password. */
        @Override
        public String toString() {
            return "PostgreSQL lease table " + table + " through " + host + ":" + port;
        }
    }

    /** The acquire did not produce a lock. */
    final class AcquireFailedException extends RuntimeException {

        private static final long serialVersionUID = 1L;

        AcquireFailedException(String resource, Throwable cause) {
            super("Could not acquire " + resource + ": " + cause, cause);
        }
    }

    /** The library's client, with a renewal scheduler of its own that {@link #pause} freezes. */
    final class Fenced implements Locker {

        private final Scheduler renewals;
        private final AutoCloseable connections;
        private final FencedLockClient client;
        private final Duration maxWait;

        Fenced(Endpoint endpoint, String prefix, Duration leaseTime, Duration maxWait, TokenScheme tokenScheme, String name) {
            this.renewals = Schedulers.newSingle("torture-renewal-" + name, true);
            this.maxWait = maxWait;
            // The label names the locker, so that the fleet view tells an operator which holder is paused.
            FencedLockClientBuilder builder = FencedLockClient.builder().keyPrefix(prefix).leaseTime(leaseTime)
                    .maxWait(maxWait).tokenScheme(tokenScheme).scheduler(renewals).holderLabel(label(name));
            this.connections = endpoint.configure(builder);
            try {
                this.client = builder.build();
            } catch (RuntimeException e) {
                closeQuietly(connections);
                throw e;
            }
        }

        private static void closeQuietly(AutoCloseable resource) {
            try {
                resource.close();
            } catch (Exception suppressed) {
                // The build failure is what matters.
            }
        }

        FencedLockClient client() {
            return client;
        }

        /** The holder label of the locker {@code name}'s grants, as the fleet view shows it. */
        static String label(String name) {
            return "torture " + name;
        }

        @Override
        public Grant acquire(String resource) {
            FencedLease lease;
            try {
                lease = client.acquire(resource).block(maxWait.plusSeconds(10));
            } catch (RuntimeException e) {
                throw new AcquireFailedException(resource, e);
            }
            if (lease == null) {
                throw new AcquireFailedException(resource, new IllegalStateException("acquire completed empty"));
            }
            return Grant.of(resource, lease);
        }

        @Override
        public void pause(long millis) throws InterruptedException {
            CountDownLatch frozen = new CountDownLatch(1);
            CountDownLatch thawed = new CountDownLatch(1);
            renewals.schedule(() -> {
                frozen.countDown();
                try {
                    // The fault itself: the renewal thread stops, as in a stop-the-world pause.
                    TimeUnit.MILLISECONDS.sleep(millis);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                } finally {
                    thawed.countDown();
                }
            });
            frozen.await();
            thawed.await();
        }

        @Override
        public void close() {
            try {
                client.close();
            } finally {
                try {
                    connections.close();
                } catch (Exception e) {
                    throw new IllegalStateException("Could not close the connections of a locker", e);
                } finally {
                    renewals.dispose();
                }
            }
        }
    }

    /** Control: {@code SET key owner NX PX ttl}, polled while held, no renewal; a grant number for the audit only. */
    final class Plain implements Locker {

        private static final String RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then "
                + "return redis.call('del', KEYS[1]) else return 0 end";

        private final RedisClient redis;
        private final StatefulRedisConnection<String, String> connection;
        private final String prefix;
        private final Duration leaseTime;
        private final Duration maxWait;

        Plain(String uri, String prefix, Duration leaseTime, Duration maxWait) {
            RedisURI redisUri = RedisURI.create(uri);
            redisUri.setTimeout(Duration.ofSeconds(2));
            this.redis = RedisClient.create(redisUri);
            this.connection = redis.connect();
            this.prefix = prefix;
            this.leaseTime = leaseTime;
            this.maxWait = maxWait;
        }

        @Override
        public Grant acquire(String resource) {
            RedisCommands<String, String> commands = connection.sync();
            String key = prefix + "{" + resource + "}";
            long giveUp = System.nanoTime() + maxWait.toNanos();
            RuntimeException last = new IllegalStateException("the lock stayed held for " + maxWait);
            while (System.nanoTime() - giveUp < 0) {
                String owner = UUID.randomUUID().toString();
                long t0 = System.nanoTime();
                try {
                    if ("OK".equals(commands.set(key, owner, SetArgs.Builder.nx().px(leaseTime.toMillis())))) {
                        long grantNumber = commands.incr(key + ":grants");
                        return Grant.plain(resource, grantNumber, owner, t0 + leaseTime.toNanos(), () -> {
                            Long deleted = commands.eval(RELEASE, ScriptOutputType.INTEGER, new String[] {key}, owner);
                            return deleted != null && deleted == 1 ? ReleaseOutcome.RELEASED : ReleaseOutcome.NOT_HELD;
                        });
                    }
                } catch (RuntimeException e) {
                    last = e;
                }
                try {
                    // The plain recipe polls; its back-off is part of the control, not synchronisation.
                    TimeUnit.MILLISECONDS.sleep(5 + ThreadLocalRandom.current().nextInt(20));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new AcquireFailedException(resource, e);
                }
            }
            throw new AcquireFailedException(resource, last);
        }

        @Override
        public void pause(long millis) throws InterruptedException {
            TimeUnit.MILLISECONDS.sleep(millis);
        }

        @Override
        public void close() {
            try {
                connection.close();
            } finally {
                redis.shutdown(Duration.ZERO, Duration.ofSeconds(2));
            }
        }
    }
}
