package dev.fenced.bench;

import java.time.Duration;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.redisson.Redisson;
import org.redisson.RedissonFencedLock;
import org.redisson.api.RLockReactive;
import org.redisson.api.RedissonClient;
import org.redisson.api.RedissonReactiveClient;
import org.redisson.config.Config;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Redisson 3.52 as a Reactor user would run it: default settings except the address and the watchdog
 * timeout, locks with the watchdog (lease time {@code -1}), so that it renews as Fenced does.
 *
 * <p>Redisson ties a lock to a "thread id"; a reactive flow may release on another thread than it acquired
 * on, so every acquisition passes an id of its own (as Fenced's owner id), through the methods that take
 * one. {@code RLockReactive} has them ({@code tryLock(wait, lease, unit, threadId)}, {@code unlock(threadId)}).
 * {@code RFencedLockReactive} does not: its {@code lockAndGetToken()}/{@code tryLockAndGetToken(...)} take the
 * id of the subscribing thread. So the fenced peer calls {@code RedissonFencedLock.tryLockAndGetTokenAsync(
 * wait, lease, unit, threadId)}, the asynchronous method Redisson's reactive proxy itself delegates to, and
 * wraps its future in a {@code Mono}.
 */
final class RedissonLock implements WaitingLock {

    /** Which Redisson lock. */
    enum Kind {
        /** {@code RedissonReactiveClient.getLock}: no token. */
        RLOCK("Redisson RLock"),
        /** {@code getFencedLock}: a token with every grant. */
        FENCED("Redisson RFencedLock");

        final String label;

        Kind(String label) {
            this.label = label;
        }
    }

    private final Kind kind;
    private final RedissonClient client;
    private final RedissonReactiveClient reactive;
    private final String prefix;
    private final AtomicLong owners = new AtomicLong();

    RedissonLock(Kind kind, String redisUri, String prefix) {
        this(kind, connect(redisUri, Duration.ofSeconds(30)), prefix);
    }

    private RedissonLock(Kind kind, RedissonClient client, String prefix) {
        this.kind = kind;
        this.client = client;
        this.reactive = client.reactive();
        this.prefix = prefix;
    }

    /** A Redisson client with its defaults (connection pool, threads), the watchdog renewing every third of {@code watchdog}. */
    static RedissonClient connect(String redisUri, Duration watchdog) {
        Config config = new Config();
        config.useSingleServer().setAddress(redisUri);
        config.setLockWatchdogTimeout(watchdog.toMillis());
        return Redisson.create(config);
    }

    @Override
    public String label() {
        return kind.label;
    }

    @Override
    public Mono<Void> pair(String name) {
        return acquireWaitingThenRelease(name, Duration.ZERO, () -> { });
    }

    @Override
    public Mono<Void> acquireWaitingThenRelease(String name, Duration maxWait, Runnable whileHeld) {
        long owner = owners.incrementAndGet();
        long wait = maxWait.toMillis();
        if (kind == Kind.RLOCK) {
            RLockReactive lock = reactive.getLock(prefix + name);
            return whenGranted(name, lock.tryLock(wait, -1, TimeUnit.MILLISECONDS, owner), whileHeld, lock.unlock(owner));
        }
        RedissonFencedLock lock = (RedissonFencedLock) client.getFencedLock(prefix + name);
        Mono<Boolean> granted = Mono.fromCompletionStage(() -> lock.tryLockAndGetTokenAsync(wait, -1, TimeUnit.MILLISECONDS, owner))
                .map(token -> true)
                .defaultIfEmpty(false);
        return whenGranted(name, granted, whileHeld, Mono.fromCompletionStage(() -> lock.unlockAsync(owner)).then());
    }

    private Mono<Void> whenGranted(String name, Mono<Boolean> granted, Runnable whileHeld, Mono<Void> release) {
        return granted.flatMap(acquired -> {
            if (!acquired) {
                return Mono.error(BenchmarkException.notAcquired(label(), name));
            }
            whileHeld.run();
            return release;
        });
    }

    /**
     * Redisson {@code RLock}s held with the watchdog, on a client of their own.
     *
     * @param redisUri the server
     * @param prefix the key prefix
     * @param leaseTime the watchdog timeout, renewed every third of it
     * @return the holder
     */
    static HeldLeases held(String redisUri, String prefix, Duration leaseTime) {
        return new Held(connect(redisUri, leaseTime), prefix);
    }

    private static final class Held implements HeldLeases {

        private record Holding(RLockReactive lock, long owner) {
        }

        private final RedissonClient client;
        private final RedissonReactiveClient reactive;
        private final String prefix;
        private final AtomicLong owners = new AtomicLong();
        private final Queue<Holding> held = new ConcurrentLinkedQueue<>();

        Held(RedissonClient client, String prefix) {
            this.client = client;
            this.reactive = client.reactive();
            this.prefix = prefix;
        }

        @Override
        public String label() {
            return Kind.RLOCK.label;
        }

        @Override
        public Mono<Void> acquire(String name) {
            RLockReactive lock = reactive.getLock(prefix + name);
            long owner = owners.incrementAndGet();
            return lock.tryLock(0, -1, TimeUnit.MILLISECONDS, owner)
                    .flatMap(acquired -> {
                        if (!acquired) {
                            return Mono.error(BenchmarkException.notAcquired(label(), name));
                        }
                        held.add(new Holding(lock, owner));
                        return Mono.empty();
                    });
        }

        @Override
        public Mono<Long> countLost() {
            return Flux.fromIterable(List.copyOf(held))
                    .flatMap(h -> h.lock().isHeldByThread(h.owner()), 256)
                    .filter(stillHeld -> !stillHeld)
                    .count();
        }

        @Override
        public Mono<Void> releaseAll() {
            return Flux.fromIterable(List.copyOf(held)).flatMap(h -> h.lock().unlock(h.owner()), 256).then();
        }

        @Override
        public void close() {
            client.shutdown();
        }
    }

    @Override
    public void close() {
        client.shutdown();
    }
}
