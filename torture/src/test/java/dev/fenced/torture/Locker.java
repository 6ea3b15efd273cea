package dev.fenced.torture;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.ReleaseOutcome;
import dev.fenced.lock.TokenScheme;
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
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * How one worker takes locks: with the library, or with the plain TTL lock of the control arm. Each worker has
 * its own locker (its own client, connections and renewal thread), reaching Redis through its own proxy, so
 * that a fault can hit one worker and not the others. Blocking: used from the worker's thread.
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

    static Locker create(Arm arm, String uri, String prefix, Duration leaseTime, Duration maxWait, String name) {
        return arm == Arm.PLAIN_TTL ? new Plain(uri, prefix, leaseTime, maxWait)
                : new Fenced(uri, prefix, leaseTime, maxWait, arm.tokenScheme(), name);
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
        private final FencedLockClient client;
        private final Duration maxWait;

        Fenced(String uri, String prefix, Duration leaseTime, Duration maxWait, TokenScheme tokenScheme, String name) {
            this.renewals = Schedulers.newSingle("torture-renewal-" + name, true);
            this.maxWait = maxWait;
            this.client = FencedLockClient.builder().redisUri(uri).keyPrefix(prefix).leaseTime(leaseTime)
                    .maxWait(maxWait).tokenScheme(tokenScheme).scheduler(renewals).build();
        }

        FencedLockClient client() {
            return client;
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
                renewals.dispose();
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
