package dev.fenced.lock;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.testservices.RedisServer;
import dev.fenced.testservices.RedisServerExtension;
import dev.fenced.testservices.TcpProxy;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.BaseSubscriber;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

/** The lock client against a real Redis, through the public API only. */
@ExtendWith(RedisServerExtension.class)
class RedisLockClientIT {

    private static final Duration BOUND = Duration.ofSeconds(20);

    private RedisServer redis;
    private String prefix;
    private RedisClient inspectorClient;
    private RedisCommands<String, String> inspector;
    private final List<AutoCloseable> toClose = new ArrayList<>();

    @BeforeEach
    void setUp(RedisServer redis) {
        this.redis = redis;
        this.prefix = "it-" + UUID.randomUUID() + ":";
        inspectorClient = RedisClient.create(redis.uri());
        StatefulRedisConnection<String, String> connection = inspectorClient.connect();
        inspector = connection.sync();
    }

    @AfterEach
    void tearDown() throws Exception {
        Collections.reverse(toClose);
        for (AutoCloseable c : toClose) {
            c.close();
        }
        inspectorClient.shutdown();
    }

    private FencedLockClient client(FencedLockClientBuilder builder) {
        FencedLockClient client = builder.keyPrefix(prefix).build();
        toClose.add(client);
        return client;
    }

    private FencedLockClient client() {
        return client(FencedLockClient.builder().redisUri(redis.uri()));
    }

    private String lockKey(String name) {
        return prefix + "{" + name + "}";
    }

    private static void await(String what, BooleanSupplier condition) throws InterruptedException {
        long giveUp = System.nanoTime() + BOUND.toNanos();
        while (!condition.getAsBoolean()) {
            assertThat(System.nanoTime() - giveUp).as("waiting for: " + what).isNegative();
            Thread.sleep(10);
        }
    }

    @Test
    void twoClientsRacingForALockExactlyOneWins() {
        FencedLockClient a = client();
        FencedLockClient b = client();
        for (int round = 0; round < 100; round++) {
            String name = "race-" + round;
            List<FencedLease> winners = Flux.merge(a.tryAcquire(name), b.tryAcquire(name)).collectList().block(BOUND);
            assertThat(winners).as("round " + round).hasSize(1);
        }
    }

    @Test
    void tokensStrictlyIncreaseOverAThousandHandoffsBetweenTwoClients() {
        // Both clients' loops run at once, so they compete for every handoff.
        LockRaces.handOvers(List.of(client(), client()), "handoff", 500, Duration.ofSeconds(120));
    }

    @Test
    void holderWhoseRenewalsCannotReachRedisLosesTheLeaseAndItsWorkIsCancelled() throws Exception {
        TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        toClose.add(proxy);
        FencedLockClient stalled = client(FencedLockClient.builder()
                .redisUri("redis://" + proxy.host() + ":" + proxy.port())
                .leaseTime(Duration.ofSeconds(1)));
        FencedLockClient healthy = client();
        AtomicBoolean cancelled = new AtomicBoolean();
        List<Long> tokens = new ArrayList<>();

        StepVerifier.create(stalled.withLease("partitioned", lease -> Flux.concat(Mono.just(lease.token()),
                        Flux.<Long>never().doOnCancel(() -> cancelled.set(true)))))
                .consumeNextWith(tokens::add)
                .then(proxy::blackhole)
                .expectErrorSatisfies(e -> {
                    assertThat(e).isInstanceOf(LeaseLostException.class);
                    assertThat(((LeaseLostException) e).reason()).isEqualTo(LossReason.EXPIRED);
                    assertThat(((LeaseLostException) e).token()).isEqualTo(tokens.get(0));
                })
                .verify(BOUND);
        assertThat(cancelled).as("work cancelled").isTrue();

        FencedLease next = healthy.acquire("partitioned", AcquireOptions.defaults().withMaxWait(Duration.ofSeconds(10))).block(BOUND);
        assertThat(next).isNotNull();
        assertThat(next.token()).isGreaterThan(tokens.get(0));
        proxy.resume();
    }

    @Test
    void aSharedClientWithoutAutoReconnectGetsANewConnectionAfterALostOne() throws Exception {
        TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        toClose.add(proxy);
        RedisClient shared = RedisClient.create();
        shared.setOptions(io.lettuce.core.ClientOptions.builder().autoReconnect(false).build());
        toClose.add(shared::shutdown);
        FencedLockClient locks = client(FencedLockClient.builder()
                .redisClient(shared, RedisURI.create("redis://" + proxy.host() + ":" + proxy.port())));
        FencedLease first = locks.acquire("no-auto-reconnect").block(BOUND);
        first.release().block(BOUND);

        proxy.resetAll();

        // Commands sent while the reset is being noticed fail; once the connection is known closed, a new one is
        // opened (without the fix, every later command fails "not connected" too).
        FencedLease second = Mono.defer(() -> locks.acquire("no-auto-reconnect"))
                .retryWhen(reactor.util.retry.Retry.backoff(5, Duration.ofMillis(50)).filter(LockServiceException.class::isInstance))
                .block(BOUND);
        assertThat(second.token()).isGreaterThan(first.token());
        second.release().block(BOUND);
    }

    @Test
    void aBurstOfAcquiresOnOneEventLoopBeforeTheFirstConnectionIsOpenAllSucceed() throws Exception {
        burstBeforeTheFirstConnection(client());
    }

    @Test
    void aBurstBeforeTheFirstConnectionSucceedsOnASharedClientWithoutAutoReconnect() throws Exception {
        RedisClient shared = RedisClient.create();
        shared.setOptions(io.lettuce.core.ClientOptions.builder().autoReconnect(false).build());
        toClose.add(shared::shutdown);
        burstBeforeTheFirstConnection(client(FencedLockClient.builder().redisClient(shared, RedisURI.create(redis.uri()))));
    }

    /**
     * 64 acquires in one turn of an event loop (a burst of requests to a service that just started): the
     * batcher sends them together, before any connection is open.
     */
    private void burstBeforeTheFirstConnection(FencedLockClient locks) throws Exception {
        for (FencedLease lease : LockRaces.burstOnOneEventLoop(locks, "burst", 64, BOUND)) {
            assertThat(inspector.get(lockKey(lease.name()))).isEqualTo(lease.ownerId() + ":" + lease.token());
        }
    }

    @Test
    void aReleaseSucceedsWhenTheUserMayNotPublishAndItsWaitersFallBackToTimers() {
        // Redis 7 gives a new user no channels: what `ACL SETUSER app on >pw ~fenced:* +@all` makes.
        String user = "fenced-c-nochannels-" + UUID.randomUUID();
        inspector.aclSetuser(user, io.lettuce.core.AclSetuserArgs.Builder.on().addPassword("pw").keyPattern(prefix + "*")
                .resetChannels().allCommands());
        toClose.add(() -> inspector.aclDeluser(user));
        RedisURI asUser = RedisURI.builder(RedisURI.create(redis.uri())).withAuthentication(user, "pw").build();
        FencedLockClient a = client(FencedLockClient.builder().redisUri(asUser).leaseTime(Duration.ofSeconds(2)));
        FencedLockClient b = client(FencedLockClient.builder().redisUri(asUser).leaseTime(Duration.ofSeconds(2)));
        FencedLease held = a.acquire("no-channels").block(BOUND);
        CompletableFuture<FencedLease> next = b.acquire("no-channels",
                AcquireOptions.defaults().withMaxWait(Duration.ofSeconds(15))).toFuture();

        StepVerifier.create(held.release()).expectNext(ReleaseOutcome.RELEASED).expectComplete().verify(BOUND);
        StepVerifier.create(Mono.fromFuture(next))
                .assertNext(lease -> assertThat(lease.token()).isGreaterThan(held.token()))
                .expectComplete()
                .verify(BOUND);
        assertThat(held.lost().block(BOUND)).as("released, not lost").isNull();
    }

    @Test
    void releaseAfterExpiryReportsNotHeldAndLeavesTheNewHolderAlone() throws Exception {
        TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        toClose.add(proxy);
        FencedLockClient stalled = client(FencedLockClient.builder()
                .redisUri("redis://" + proxy.host() + ":" + proxy.port())
                .leaseTime(Duration.ofMillis(600)));
        FencedLockClient healthy = client();

        FencedLease old = stalled.acquire("expiring").block(BOUND);
        assertThat(old).isNotNull();
        proxy.blackhole();
        StepVerifier.create(old.lost()).assertNext(e -> assertThat(e.reason()).isEqualTo(LossReason.EXPIRED)).verifyComplete();
        FencedLease current = healthy.acquire("expiring").block(BOUND);
        assertThat(current).isNotNull();
        proxy.resume();

        StepVerifier.create(old.release()).expectNext(ReleaseOutcome.NOT_HELD).expectComplete().verify(BOUND);
        assertThat(inspector.get(lockKey("expiring"))).isEqualTo(current.ownerId() + ":" + current.token());
        assertThat(current.isHeld()).isTrue();
    }

    @Test
    void cancelledAcquiresLeaveNoKeyBehind() throws Exception {
        FencedLockClient client = client();
        client.acquire("warm-up").flatMap(FencedLease::release).block(BOUND); // connected: attempts go out at once
        List<String> keys = new ArrayList<>();
        List<String> fences = new ArrayList<>();
        List<FencedLease> delivered = Collections.synchronizedList(new ArrayList<>());
        for (int i = 0; i < 50; i++) {
            String name = "cancelled-" + i;
            keys.add(lockKey(name));
            fences.add(lockKey(name) + ":fence");
            // Unlike a lambda subscriber, this one keeps a lease that arrives as it is disposed: a lease that was
            // emitted is the subscriber's, and the test must not lose track of it.
            BaseSubscriber<FencedLease> pending = new BaseSubscriber<>() {
                @Override
                protected void hookOnNext(FencedLease lease) {
                    delivered.add(lease);
                }
            };
            (i % 3 == 0 ? client.tryAcquire(name) : client.acquire(name)).subscribe(pending);
            if (i % 2 == 0) {
                Thread.sleep(1); // let some attempts reach Redis before the cancel
            }
            pending.dispose();
        }
        // A lease delivered is the subscriber's: release those (also any still arriving); the rest must undo themselves.
        await("no lock key left", () -> {
            List<FencedLease> toRelease;
            synchronized (delivered) {
                toRelease = new ArrayList<>(delivered);
            }
            Flux.fromIterable(toRelease).flatMap(FencedLease::release).blockLast(BOUND);
            return inspector.exists(keys.toArray(String[]::new)) == 0;
        });
        assertThat(delivered.size()).as("cancelled before delivery").isLessThan(50);
        assertThat(inspector.exists(fences.toArray(String[]::new))).as("attempts that reached Redis").isPositive();
    }

    @Test
    void everyCallWorksAfterTheScriptCacheIsFlushed() throws Exception {
        FencedLockClient client = client(FencedLockClient.builder().redisUri(redis.uri()).leaseTime(Duration.ofSeconds(3)));
        FencedLease first = client.acquire("flushed").block(BOUND);
        assertThat(first).isNotNull();

        inspector.scriptFlush();
        // The deadline stays put until a renewal succeeds: one that ran after the flush moves it on (by about the
        // renewal period of 1 s; 100 ms is enough to tell).
        long deadline = System.nanoTime() + first.remainingValidity().toNanos();
        await("a renewal after the flush",
                () -> System.nanoTime() + first.remainingValidity().toNanos() > deadline + 100_000_000L);
        assertThat(first.isHeld()).isTrue();
        StepVerifier.create(first.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();

        inspector.scriptFlush();
        FencedLease second = client.acquire("flushed").block(BOUND);
        assertThat(second).isNotNull();
        assertThat(second.token()).isGreaterThan(first.token());
    }

    @Test
    void releaseDeletesTheKeyAndWakesAWaiterThroughPubSub() throws Exception {
        FencedLockClient holderClient = client(FencedLockClient.builder().redisUri(redis.uri()).leaseTime(Duration.ofSeconds(60)));
        FencedLockClient waiterClient = client();
        FencedLease holder = holderClient.acquire("notified").block(BOUND);
        assertThat(holder).isNotNull();
        String channel = lockKey("notified") + ":released";

        CompletableFuture<FencedLease> waiting = waiterClient
                .acquire("notified", AcquireOptions.defaults().withMaxWait(Duration.ofSeconds(20)))
                .toFuture();
        await("the waiter listens", () -> {
            Map<String, Long> subscribers = inspector.pubsubNumsub(channel);
            return subscribers.getOrDefault(channel, 0L) > 0;
        });
        assertThat(waiting).isNotDone();

        StepVerifier.create(holder.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();
        // The holder's key would live for 60 s: only the notification can wake the waiter within 20 s.
        FencedLease next = waiting.get(20, java.util.concurrent.TimeUnit.SECONDS);
        assertThat(next.token()).isGreaterThan(holder.token());
        assertThat(inspector.get(lockKey("notified"))).isEqualTo(next.ownerId() + ":" + next.token());
        next.release().block(BOUND);
        assertThat(inspector.exists(lockKey("notified"))).isZero();
        await("the waiter stopped listening", () -> inspector.pubsubNumsub(channel).getOrDefault(channel, 0L) == 0);
    }

    @Test
    void unreachableRedisFailsWithinTheCommandTimeout() {
        FencedLockClient client = client(FencedLockClient.builder().redisUri("redis://127.0.0.1:1").leaseTime(Duration.ofSeconds(3)));
        StepVerifier.create(client.acquire("nowhere"))
                .expectErrorSatisfies(e -> assertThat(e).isInstanceOf(LockServiceException.class)
                        .hasMessageStartingWith("Lock service failed to acquire for lock 'nowhere': "))
                .verify(BOUND);
    }

    @Test
    void silentRedisFailsWithinTheCommandTimeout() {
        TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        toClose.add(proxy);
        proxy.blackhole();
        FencedLockClient client = client(FencedLockClient.builder()
                .redisUri("redis://" + proxy.host() + ":" + proxy.port())
                .leaseTime(Duration.ofSeconds(3)));
        StepVerifier.create(client.acquire("silent"))
                .expectErrorSatisfies(e -> assertThat(e).isInstanceOf(LockServiceException.class)
                        .hasMessage("Lock service failed to acquire for lock 'silent': cannot connect to Redis within 5000 ms"))
                .verify(BOUND);
        proxy.resume();
    }

    @Test
    void silentRedisOnAnOpenConnectionFailsWithinTheCommandTimeout() {
        TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        toClose.add(proxy);
        FencedLockClient client = client(FencedLockClient.builder()
                .redisUri("redis://" + proxy.host() + ":" + proxy.port())
                .leaseTime(Duration.ofSeconds(3)));
        client.acquire("warm").flatMap(FencedLease::release).block(BOUND);
        proxy.blackhole();
        StepVerifier.create(client.acquire("silent"))
                .expectErrorSatisfies(e -> assertThat(e).isInstanceOf(LockServiceException.class)
                        .hasMessage("Lock service failed to acquire for lock 'silent': no reply within the command timeout of 1000 ms"))
                .verify(BOUND);
        proxy.resume();
    }

    @Test
    void closeReleasesHeldLeases() {
        FencedLockClient client = client();
        FencedLease lease = client.acquire("closing").block(BOUND);
        assertThat(lease).isNotNull();
        assertThat(inspector.exists(lockKey("closing"))).isEqualTo(1);
        client.close();
        assertThat(inspector.exists(lockKey("closing"))).isZero();
        StepVerifier.create(lease.lost()).assertNext(e -> assertThat(e.reason()).isEqualTo(LossReason.CLIENT_CLOSED)).verifyComplete();
    }

    @Test
    void everyAcquisitionDrawsAFreshFixedWidthOwnerId() {
        // Owner ids derived from a per-client seed and a sequence repeat in every process restored from one
        // snapshot (CRaC, SnapStart): two holders of one lock with one owner and token. Each id must carry
        // entropy of its own, so no two share even half of their digits as a common prefix.
        FencedLockClient first = client();
        FencedLockClient second = client();
        java.util.Set<String> owners = new java.util.HashSet<>();
        java.util.Set<String> prefixes = new java.util.HashSet<>();
        for (int i = 0; i < 100; i++) {
            for (FencedLockClient c : List.of(first, second)) {
                FencedLease lease = c.acquire("owner-" + i).block(BOUND);
                assertThat(lease).isNotNull();
                assertThat(lease.ownerId()).matches("[0-9a-f]{32}");
                assertThat(inspector.get(lockKey("owner-" + i))).isEqualTo(lease.ownerId() + ":" + lease.token());
                assertThat(owners.add(lease.ownerId())).as("a new owner id").isTrue();
                assertThat(prefixes.add(lease.ownerId().substring(0, 16))).as("a new first half of " + lease.ownerId()).isTrue();
                StepVerifier.create(lease.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();
            }
        }
    }

    @Test
    void sharedLettuceClientIsLeftOpen() {
        RedisClient shared = RedisClient.create();
        try {
            FencedLockClient client = FencedLockClient.builder().redisClient(shared, RedisURI.create(redis.uri())).keyPrefix(prefix).build();
            StepVerifier.create(client.withLease("shared", lease -> Mono.just(lease.token())))
                    .assertNext(token -> assertThat(token).isPositive()).verifyComplete();
            client.close();
            assertThat(shared.connect(RedisURI.create(redis.uri())).sync().ping()).isEqualTo("PONG");
        } finally {
            shared.shutdown();
        }
    }
}
