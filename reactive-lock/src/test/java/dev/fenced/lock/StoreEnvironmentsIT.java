package dev.fenced.lock;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import dev.fenced.testservices.PostgresServerExtension;
import dev.fenced.testservices.RedisCluster;
import dev.fenced.testservices.RedisProcess;
import dev.fenced.testservices.RedisSentinels;
import dev.fenced.testservices.RedisServerExtension;
import dev.fenced.testservices.TcpProxy;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.output.NestedMultiOutput;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.CommandType;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Function;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.extension.TestExecutionExceptionHandler;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Hooks;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Operators;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;
import reactor.test.StepVerifier;
import reactor.util.context.Context;

/**
 * The environment matrix of {@code ENVIRONMENTS.md} for lock stores, as one contract: every store (Redis 7 and 6.2
 * standalone, Sentinel, Cluster; PostgreSQL with the pool's default isolation at each level) against every edge
 * (a cold-start burst, a user with exactly the README's ACL, a contended hand-over, close with held leases, a
 * disposed injected scheduler, Reactor's dropped-value hook reset by other code; on the standalone Redis servers,
 * through a proxy, a reset while a command is held in the network and one silent connection). A cell is named by its
 * environment ("Redis 6.2, cold-start burst"). The servers are started once and shared by every cell; each cell
 * uses a key prefix of its own.
 */
class StoreEnvironmentsIT {

    private static final Duration BOUND = Duration.ofSeconds(30);

    /** A failure names its cell first ("Redis 6.2, close() with held leases: ..."), whatever the report shows. */
    @RegisterExtension
    static final TestExecutionExceptionHandler CELL_NAMES = (context, error) -> {
        throw new AssertionError(context.getDisplayName() + ": " + error.getMessage(), error);
    };

    private final List<AutoCloseable> toClose = new ArrayList<>();

    @AfterEach
    void tearDown() throws Exception {
        Collections.reverse(toClose);
        for (AutoCloseable c : toClose) {
            c.close();
        }
    }

    @AfterAll
    static void stopServers() {
        for (Store store : Store.values()) {
            store.stop();
        }
    }

    static Stream<Store> stores() {
        return Stream.of(Store.values());
    }

    static Stream<Store> redisStores() {
        return Stream.of(Store.values()).filter(Store::redis);
    }

    /** The stores a client reaches through one address, which a proxy can stand for. */
    static Stream<Store> standaloneRedis() {
        return Stream.of(Store.REDIS_7, Store.REDIS_6);
    }

    /** A client of the cell's store reached through a proxy, which stands for the network. */
    private FencedLockClient throughProxy(Cell cell, TcpProxy proxy, FencedLockClientBuilder builder) {
        return built(builder.redisUri("redis://" + proxy.host() + ":" + proxy.port()).keyPrefix(cell.prefix));
    }

    private TcpProxy proxyTo(Cell cell) {
        RedisURI address = RedisURI.create(((RedisEnvironment) cell.env).uri);
        TcpProxy proxy = TcpProxy.start(address.getHost(), address.getPort());
        toClose.add(proxy);
        return proxy;
    }

    /** Acquires {@code name} once the client has reconnected (acquires fail fast while it is disconnected). */
    private static FencedLease onceReconnected(FencedLockClient client, String name) throws InterruptedException {
        long giveUp = System.nanoTime() + BOUND.toNanos();
        while (true) {
            try {
                return client.tryAcquire(name).blockOptional(BOUND).orElseThrow();
            } catch (LockServiceException notYetConnected) {
                assertThat(System.nanoTime() - giveUp).as("reconnected in time").isNegative();
                Thread.sleep(20);
            }
        }
    }

    private static Cell cell(Store store) {
        return new Cell(store.environment(), "env-" + UUID.randomUUID().toString().substring(0, 8) + ":");
    }

    private FencedLockClient client(Cell cell, FencedLockClientBuilder builder) {
        return built(cell.env.target(builder, cell.prefix).keyPrefix(cell.prefix));
    }

    private FencedLockClient built(FencedLockClientBuilder builder) {
        FencedLockClient client = builder.build();
        toClose.add(client);
        return client;
    }

    private static void await(String what, BooleanSupplier condition) throws InterruptedException {
        long giveUp = System.nanoTime() + BOUND.toNanos();
        while (!condition.getAsBoolean()) {
            assertThat(System.nanoTime() - giveUp).as("waiting for: " + what).isNegative();
            Thread.sleep(10);
        }
    }

    @ParameterizedTest(name = "{0}, cold-start burst")
    @MethodSource("stores")
    void aBurstOf64AcquiresOnOneEventLoopBeforeAnyConnectionIsOpenAllSucceed(Store store) throws Exception {
        Cell cell = cell(store);
        FencedLockClient locks = client(cell, FencedLockClient.builder());
        for (FencedLease lease : LockRaces.burstOnOneEventLoop(locks, "burst", 64, BOUND)) {
            assertThat(cell.env.holds(lease.lockId())).as(lease.name() + " held in the store").isTrue();
        }
    }

    @ParameterizedTest(name = "{0}, ACL user with exactly the README's permissions")
    @MethodSource("redisStores")
    void aUserWithExactlyTheDocumentedAclHasEveryLockOperation(Store store) throws Exception {
        Cell cell = cell(store);
        String user = "fenced-env-" + UUID.randomUUID();
        cell.env.createUser(user, "pw", Readme.aclRules(cell.prefix, store == Store.CLUSTER));
        toClose.add(() -> cell.env.deleteUser(user));
        Logger fenced = (Logger) LoggerFactory.getLogger("dev.fenced");
        ListAppender<ILoggingEvent> events = new ListAppender<>();
        events.start();
        fenced.addAppender(events);
        toClose.add(() -> fenced.detachAppender(events));
        FencedLockClient a = built(cell.env.asUser(FencedLockClient.builder(), user, "pw")
                .keyPrefix(cell.prefix).leaseTime(Duration.ofSeconds(5)).renewalPeriod(Duration.ofMillis(100)));
        FencedLockClient b = built(cell.env.asUser(FencedLockClient.builder(), user, "pw").keyPrefix(cell.prefix));

        StepVerifier.create(a.ping()).expectNextCount(1).verifyComplete();
        // Scripts cached by earlier cells would hide a missing +eval: the first call must take the NOSCRIPT fallback.
        cell.env.flushScripts();
        FencedLease held = a.acquire("acl").block(BOUND);
        assertThat(held).isNotNull();
        assertThat(cell.env.clients(held.lockId())).as("the client runs as the user").contains(" user=" + user + " ");
        CompletableFuture<FencedLease> next = b.acquire("acl", AcquireOptions.defaults().withMaxWait(BOUND)).toFuture();
        // Validity only shrinks until a renewal succeeds, which moves the deadline on (b waits meanwhile).
        Duration granted = held.remainingValidity();
        await("a renewal by the user", () -> held.remainingValidity().compareTo(granted) > 0);
        assertThat(held.isHeld()).isTrue();

        cell.env.flushScripts(); // the release and the waiter's acquire load their scripts again, as the user
        StepVerifier.create(held.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();
        FencedLease taken = next.get(BOUND.toMillis(), TimeUnit.MILLISECONDS);
        assertThat(taken.token()).isGreaterThan(held.token());
        StepVerifier.create(b.withLease("acl-scope", lease -> Mono.just(lease.token()))).expectNextCount(1).verifyComplete();
        // The fleet view (SCAN and the inspect script) and force-release, with the README's permissions.
        StepVerifier.create(a.locks("acl*").map(LockInfo::token)).expectNext(taken.token()).verifyComplete();
        StepVerifier.create(a.lock("acl").map(LockInfo::token)).expectNext(taken.token()).verifyComplete();
        StepVerifier.create(taken.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();
        assertThat(events.list).as("nothing refused (a refused SUBSCRIBE or INFO is a WARN line)")
                .noneSatisfy(e -> assertThat(e.getLevel().isGreaterOrEqual(Level.WARN)).isTrue());
        // Last: a force-release logs a WARN line of its own.
        FencedLease toBreak = a.acquire("acl-broken").block(BOUND);
        assertThat(toBreak).isNotNull();
        StepVerifier.create(b.forceRelease("acl-broken", "ACL cell").map(ForceReleaseResult::token))
                .expectNext(toBreak.token()).verifyComplete();
    }

    @ParameterizedTest(name = "{0}, contended hand-over")
    @MethodSource("stores")
    void fourClientsHandingOneLockOverEachGetItInTokenOrder(Store store) {
        Cell cell = cell(store);
        List<FencedLockClient> clients = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            clients.add(client(cell, FencedLockClient.builder().maxWait(BOUND)));
        }
        LockRaces.handOvers(clients, "hand-over", 25, BOUND);
    }

    /**
     * Every lease granted is held in the store: its release answers RELEASED. A soak test, not a deterministic one: on
     * PostgreSQL at a pool default of SERIALIZABLE the commit of a lone acquire could fail (40001, "pivot during
     * commit attempt") after its row was sent, and the store dropped the commit's error and answered granted; the
     * release of that lease answered NOT_HELD (a review saw a few in 3,000 pairs; this test failed once in one run
     * and passed three in another on the old code). {@code PostgresCommitFailuresIT} fails that code every time.
     */
    @ParameterizedTest(name = "{0}, pairs at 64 in flight")
    @MethodSource("stores")
    void everyLeaseGrantedIsHeldInTheStoreUntilReleased(Store store) {
        Cell cell = cell(store);
        FencedLockClient client = client(cell, FencedLockClient.builder().maxWait(BOUND));
        List<String> names = new ArrayList<>();
        for (int i = 0; i < 2_000; i++) {
            names.add("pair-" + (i % 200));
        }
        List<ReleaseOutcome> outcomes = Flux.fromIterable(names)
                .flatMap(name -> client.acquire(name).flatMap(FencedLease::release), 64)
                .collectList().block(BOUND.multipliedBy(4));
        assertThat(outcomes).as("releases of granted leases").hasSize(names.size()).containsOnly(ReleaseOutcome.RELEASED);
    }

    @ParameterizedTest(name = "{0}, reset while a command is blocked")
    @MethodSource("standaloneRedis")
    void aResetWhileAnAcquireIsHeldInTheNetworkFailsItAndLeavesNoLockBehind(Store store) throws Exception {
        Cell cell = cell(store);
        TcpProxy proxy = proxyTo(cell);
        FencedLockClient locks = throughProxy(cell, proxy, FencedLockClient.builder());
        FencedLease before = locks.acquire("held-before").block(BOUND); // connected, and a lease on that server
        assertThat(before).isNotNull();
        proxy.blackhole();
        CompletableFuture<FencedLease> blocked = locks.tryAcquire("blocked").toFuture();

        proxy.resetAll();
        proxy.resume();

        assertThat(blocked).failsWithin(BOUND).withThrowableThat().havingCause().isInstanceOf(LockServiceException.class);
        FencedLease after = onceReconnected(locks, "blocked");
        assertThat(cell.env.holds(after.lockId())).as("granted once reconnected: nothing was left behind").isTrue();
        assertThat(before.isHeld()).as("the same server after the reset: the lease is kept").isTrue();
    }

    @ParameterizedTest(name = "{0}, one silent connection")
    @MethodSource("standaloneRedis")
    void aSilentConnectionFailsCommandsWithinTheirTimeoutAndLosesItsLeasesLoudly(Store store) throws Exception {
        Cell cell = cell(store);
        TcpProxy proxy = proxyTo(cell);
        FencedLockClient silent = throughProxy(cell, proxy,
                FencedLockClient.builder().leaseTime(Duration.ofSeconds(1)).commandTimeout(Duration.ofMillis(200)));
        FencedLockClient healthy = client(cell, FencedLockClient.builder());
        FencedLease held = silent.acquire("silent").block(BOUND);
        assertThat(held).isNotNull();

        proxy.blackhole();

        StepVerifier.create(silent.tryAcquire("silent-other"))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(LockServiceException.class)
                        .hasMessageContaining("no reply within the command timeout of 200 ms"));
        StepVerifier.create(held.lost())
                .assertNext(loss -> assertThat(loss.reason()).isEqualTo(LossReason.EXPIRED))
                .verifyComplete();
        FencedLease next = healthy.acquire("silent", AcquireOptions.defaults().withMaxWait(BOUND)).block(BOUND);
        assertThat(next).as("the other client gets the lock once the silent one's lease ran out").isNotNull();
        proxy.resume();
        StepVerifier.create(held.release()).expectNext(ReleaseOutcome.NOT_HELD).verifyComplete();
        assertThat(next.isHeld()).isTrue();
    }

    @ParameterizedTest(name = "{0}, close() with held leases")
    @MethodSource("stores")
    void closeReleasesEveryHeldLeaseInTheStoreAtOnce(Store store) {
        Cell cell = cell(store);
        FencedLockClient closing = client(cell, FencedLockClient.builder());
        FencedLockClient other = client(cell, FencedLockClient.builder());
        List<FencedLease> held = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            held.add(closing.acquire("closing-" + i).block(BOUND));
        }

        closing.close();

        for (FencedLease lease : held) {
            assertThat(cell.env.holds(lease.lockId())).as(lease.name() + " released in the store").isFalse();
            assertThat(other.tryAcquire(lease.name()).blockOptional(BOUND)).as(lease.name() + " free for another client")
                    .isPresent();
        }
    }

    @ParameterizedTest(name = "{0}, disposed injected scheduler")
    @MethodSource("stores")
    void aDisposedInjectedSchedulerIsReportedAsTheSchedulerRejectingWork(Store store) {
        Cell cell = cell(store);
        Scheduler injected = Schedulers.newSingle("env-injected", true);
        FencedLockClient locks = client(cell, FencedLockClient.builder().scheduler(injected));
        FencedLease held = locks.acquire("before-dispose").block(BOUND);
        assertThat(held).isNotNull();

        injected.dispose();

        StepVerifier.create(locks.acquire("after-dispose"))
                .verifyErrorSatisfies(e -> assertThat(e).isExactlyInstanceOf(RejectedExecutionException.class)
                        .hasMessageStartingWith("Cannot acquire lock 'after-dispose': the lock client's scheduler rejected work")
                        .hasMessageContaining("StepVerifier.withVirtualTime"));
        StepVerifier.create(held.lost())
                .assertNext(loss -> assertThat(loss.reason()).isEqualTo(LossReason.SCHEDULER_REJECTED))
                .verifyComplete();
    }

    @ParameterizedTest(name = "{0}, hold cap")
    @MethodSource("stores")
    void aHoldCapBoundsTheLocksExpiryInTheStoreAndEndsTheLeaseThere(Store store) throws InterruptedException {
        Cell cell = cell(store);
        FencedLockClient locks = client(cell, FencedLockClient.builder().leaseTime(Duration.ofSeconds(3)));
        FencedLockClient other = client(cell, FencedLockClient.builder().leaseTime(Duration.ofSeconds(3)));
        Duration cap = Duration.ofMillis(3_500);
        long before = System.nanoTime();
        FencedLease lease = locks.acquire("capped", AcquireOptions.defaults().withMaxHold(cap)).block(BOUND);
        assertThat(lease).isNotNull();
        CompletableFuture<LeaseLostException> lost = lease.lost().toFuture();

        // Every renewal asks only for what is left of the cap: the store's expiry never lies past it (slack: the
        // renewal's way to the store).
        while (!lost.isDone()) {
            long capLeftMillis = TimeUnit.NANOSECONDS.toMillis(before + cap.toNanos() - System.nanoTime());
            long remaining = cell.env.remainingMillis(lease.lockId());
            assertThat(remaining).as("the store's expiry of a capped lock").isLessThanOrEqualTo(capLeftMillis + 100);
            Thread.sleep(50);
        }

        assertThat(lost.join().reason()).isEqualTo(LossReason.MAX_HOLD_REACHED);
        await("the capped lock is freed", () -> !cell.env.holds(lease.lockId()));
        assertThat(other.tryAcquire("capped").blockOptional(BOUND)).as("free for another client").isPresent();
    }

    @ParameterizedTest(name = "{0}, release no sooner than")
    @MethodSource("stores")
    void aReleaseWithATailLeavesTheLockToTheStoresExpiry(Store store) {
        Cell cell = cell(store);
        FencedLockClient locks = client(cell, FencedLockClient.builder().leaseTime(Duration.ofSeconds(3)));
        FencedLockClient other = client(cell, FencedLockClient.builder().leaseTime(Duration.ofSeconds(3)));
        long before = System.nanoTime();
        FencedLease lease = locks.acquire("tail").block(BOUND);
        assertThat(lease).isNotNull();

        StepVerifier.create(lease.releaseNoSoonerThan(Duration.ofMillis(2_500)))
                .expectNext(ReleaseOutcome.LEFT_TO_EXPIRE).verifyComplete();
        long remaining = cell.env.remainingMillis(lease.lockId());
        long floor = 2_500 - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - before);

        // The store's own expiry holds the tail: never shorter than 2.5 s after the grant.
        assertThat(remaining).as("the store's expiry").isGreaterThanOrEqualTo(floor - 1).isLessThanOrEqualTo(2_600);
        assertThat(lease.isHeld()).isFalse();
        assertThat(locks.heldLeases()).isZero();
        assertThat(other.tryAcquire("tail").blockOptional(BOUND)).as("refused during the tail").isEmpty();
        locks.close();
        assertThat(cell.env.holds(lease.lockId())).as("close leaves the tail in place").isTrue();

        FencedLease next = other.acquire("tail", AcquireOptions.defaults().withMaxWait(Duration.ofSeconds(10))).block(BOUND);
        assertThat(next).isNotNull();
        assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - before)).as("granted after the tail")
                .isGreaterThanOrEqualTo(2_500);
        assertThat(next.token()).isGreaterThan(lease.token());
    }

    @ParameterizedTest(name = "{0}, a job on two instances")
    @MethodSource("stores")
    void aJobOnTwoInstancesRunsOnOneAndKeepsItsLockAtLeastForByTheStoresClock(Store store) {
        Cell cell = cell(store);
        FencedLockClient one = client(cell, FencedLockClient.builder().leaseTime(Duration.ofSeconds(3)));
        FencedLockClient two = client(cell, FencedLockClient.builder().leaseTime(Duration.ofSeconds(3)));
        FencedJob job = FencedJob.of("report", Duration.ofSeconds(20)).withLockAtLeastFor(Duration.ofSeconds(3));
        List<Long> tokensSeen = Collections.synchronizedList(new ArrayList<>());
        Mono<Void> work = FencedLease.current("report").doOnNext(lease -> tokensSeen.add(lease.token()))
                .then(Mono.delay(Duration.ofMillis(300))).then();

        List<JobOutcome> outcomes = Flux.merge(one.runJob(job, work), two.runJob(job, work)).collectList().block(BOUND);

        assertThat(outcomes).extracting(JobOutcome::status)
                .containsExactlyInAnyOrder(JobOutcome.Status.RAN, JobOutcome.Status.SKIPPED);
        JobOutcome ran = outcomes.stream().filter(JobOutcome::ran).findFirst().orElseThrow();
        assertThat(tokensSeen).as("the job saw its lease in the Context").containsExactly(ran.token());
        String lockId = cell.prefix + "{report}";
        assertThat(cell.env.remainingMillis(lockId)).as("the tail is the store's expiry").isPositive()
                .isLessThanOrEqualTo(3_100);
        assertThat(one.heldLeases() + two.heldLeases()).isZero();
        assertThat(one.runJob(job, work).block(BOUND).status()).as("skipped during the tail").isEqualTo(JobOutcome.Status.SKIPPED);
    }

    @ParameterizedTest(name = "{0}, a job cut off at lockAtMostFor")
    @MethodSource("stores")
    void aJobThatOverrunsLockAtMostForIsCancelledAndItsLockFreed(Store store) throws InterruptedException {
        Cell cell = cell(store);
        FencedLockClient one = client(cell, FencedLockClient.builder().leaseTime(Duration.ofSeconds(3)));
        FencedLockClient two = client(cell, FencedLockClient.builder().leaseTime(Duration.ofSeconds(3)));
        FencedJob job = FencedJob.of("overrun", Duration.ofMillis(1_500));
        CompletableFuture<Boolean> cancelled = new CompletableFuture<>();

        JobOutcome outcome = one.runJob(job, Mono.never().doOnCancel(() -> cancelled.complete(true))).block(BOUND);

        assertThat(outcome.status()).isEqualTo(JobOutcome.Status.CUT_OFF);
        assertThat(cancelled).isCompletedWithValue(true);
        await("the lock is freed", () -> !cell.env.holds(cell.prefix + "{overrun}"));
        assertThat(two.runJob(job, Mono.empty()).block(BOUND).status()).isEqualTo(JobOutcome.Status.RAN);
    }

    @ParameterizedTest(name = "{0}, Hooks.resetOnNextDropped() before the client is built")
    @MethodSource("stores")
    void aLeaseDroppedAfterOtherCodeResetReactorsHookIsStillReleased(Store store) throws InterruptedException {
        Cell cell = cell(store);
        client(cell, FencedLockClient.builder()); // a client built earlier installed the hook
        Hooks.resetOnNextDropped(); // as test set-ups do
        FencedLockClient locks = client(cell, FencedLockClient.builder());
        FencedLease lease = locks.acquire("dropped").block(BOUND);
        assertThat(lease).isNotNull();

        Operators.onNextDropped(lease, Context.empty()); // what timeout() does with a lease that races it

        await("the dropped lease released in the store", () -> !cell.env.holds(lease.lockId()));
        assertThat(locks.heldLeases()).isZero();
    }

    /** The README's ACL line for a key prefix, as the rules after {@code ACL SETUSER <user>}. */
    static final class Readme {

        private Readme() {
        }

        /**
         * The rules of the README's ACL line, and on a cluster those of its cluster line too.
         *
         * @param prefix the key prefix to put in the patterns
         * @param cluster whether the server is a cluster
         * @return the rules
         */
        static List<String> aclRules(String prefix, boolean cluster) throws IOException {
            String readme = Files.readString(Path.of("..", "README.md"));
            int section = readme.indexOf("### Redis requirements");
            assertThat(section).as("README has Redis requirements").isNotNegative();
            String line = after(readme, section, "ACL SETUSER app on >secret ", "\n");
            if (cluster) {
                line += " " + after(readme, section, "On a cluster, also `ACL SETUSER app ", "`");
            }
            List<String> rules = new ArrayList<>(List.of("on"));
            for (String rule : line.split("\\s+")) {
                if (rule.equals(">secret")) {
                    continue; // the test sets its own password
                }
                rules.add(rule.replace("fenced:", prefix));
            }
            return rules;
        }

        private static String after(String readme, int section, String start, String end) {
            int at = readme.indexOf(start, section);
            assertThat(at).as("README says: " + start).isNotNegative();
            return readme.substring(at + start.length(), readme.indexOf(end, at + start.length())).strip();
        }
    }

    /** One cell's environment and key prefix. */
    private record Cell(Environment env, String prefix) {
    }

    /** The stores of the matrix, each started on first use and shared by its cells. */
    enum Store {
        REDIS_7("Redis 7", true, () -> RedisEnvironment.shared(RedisServerExtension.server().uri())),
        REDIS_6("Redis 6.2", true, () -> RedisEnvironment.process(RedisProcess.startRedis6())),
        SENTINEL("Redis Sentinel", true, () -> RedisEnvironment.sentinels(RedisSentinels.start())),
        CLUSTER("Redis Cluster", true, () -> RedisEnvironment.cluster(RedisCluster.start(3))),
        POSTGRES_READ_COMMITTED("PostgreSQL, pool default READ COMMITTED", false,
                () -> new PostgresEnvironment("read committed")),
        POSTGRES_REPEATABLE_READ("PostgreSQL, pool default REPEATABLE READ", false,
                () -> new PostgresEnvironment("repeatable read")),
        POSTGRES_SERIALIZABLE("PostgreSQL, pool default SERIALIZABLE", false,
                () -> new PostgresEnvironment("serializable"));

        private final String label;
        private final boolean redis;
        private final Supplier<Environment> start;
        private @Nullable Environment running;

        Store(String label, boolean redis, Supplier<Environment> start) {
            this.label = label;
            this.redis = redis;
            this.start = start;
        }

        boolean redis() {
            return redis;
        }

        synchronized Environment environment() {
            if (running == null) {
                running = start.get();
            }
            return running;
        }

        synchronized void stop() {
            if (running != null) {
                running.close();
                running = null;
            }
        }

        @Override
        public String toString() {
            return label;
        }
    }

    /** A lock store the cells run against. */
    interface Environment extends AutoCloseable {

        /** The builder, pointed at this store. */
        FencedLockClientBuilder target(FencedLockClientBuilder builder, String prefix);

        /** The builder, pointed at this store as {@code user}. */
        default FencedLockClientBuilder asUser(FencedLockClientBuilder builder, String user, String password) {
            throw new UnsupportedOperationException("no users on " + this);
        }

        /** {@code CLIENT LIST} of the node that holds {@code lockId}: who is connected to it. */
        default String clients(String lockId) {
            throw new UnsupportedOperationException("no users on " + this);
        }

        /** Whether the store holds the lock now (a lock key, or a row with an owner whose lease runs). */
        boolean holds(String lockId);

        /** How long the lock has left by the store's clock, in ms ({@code PTTL}, or the row's {@code expires_at}). */
        long remainingMillis(String lockId);

        default void createUser(String user, String password, List<String> rules) {
            throw new UnsupportedOperationException("no users on " + this);
        }

        default void deleteUser(String user) {
            throw new UnsupportedOperationException("no users on " + this);
        }

        /** Empties the script cache of every node, as a restart or a failover does (the next call falls back to EVAL). */
        default void flushScripts() {
            throw new UnsupportedOperationException("no scripts on " + this);
        }

        @Override
        void close();
    }

    /** Redis: where to connect, and the nodes to inspect and to create users on. */
    static final class RedisEnvironment implements Environment {

        /** Runs a command on one node. */
        interface Node {
            @Nullable Object call(String... args);
        }

        private final String uri;
        private final boolean cluster;
        private final List<Node> nodes;
        private final Function<String, Node> nodeOf;
        private final AutoCloseable stop;

        private RedisEnvironment(String uri, boolean cluster, List<Node> nodes, Function<String, Node> nodeOf,
                AutoCloseable stop) {
            this.uri = uri;
            this.cluster = cluster;
            this.nodes = nodes;
            this.nodeOf = nodeOf;
            this.stop = stop;
        }

        /** The shared Redis 7 of the build (the environment's, a container's or the bundled one). */
        static RedisEnvironment shared(String uri) {
            RedisClient client = RedisClient.create(uri);
            StatefulRedisConnection<String, String> connection = client.connect();
            Node node = args -> {
                CommandArgs<String, String> rest = new CommandArgs<>(StringCodec.UTF8);
                for (int i = 1; i < args.length; i++) {
                    rest.add(args[i]);
                }
                return connection.sync().dispatch(CommandType.valueOf(args[0]), new NestedMultiOutput<>(StringCodec.UTF8),
                        rest);
            };
            return new RedisEnvironment(uri, false, List.of(node), key -> node, client::shutdown);
        }

        static RedisEnvironment process(RedisProcess redis) {
            return new RedisEnvironment(redis.uri(), false, List.of(redis::call), key -> redis::call, redis);
        }

        static RedisEnvironment sentinels(RedisSentinels group) {
            // No failover here: the primary the group started with holds the keys.
            return new RedisEnvironment(group.sentinelUri(), false,
                    List.of(group.primary()::call, group.replica()::call), key -> group.primary()::call, group);
        }

        static RedisEnvironment cluster(RedisCluster cluster) {
            List<Node> nodes = new ArrayList<>();
            for (RedisProcess node : cluster.nodes()) {
                nodes.add(node::call);
            }
            return new RedisEnvironment(cluster.seedUri(), true, nodes,
                    key -> cluster.nodes().get(cluster.ownerOf(cluster.slotOf(key)))::call, cluster);
        }

        @Override
        public FencedLockClientBuilder target(FencedLockClientBuilder builder, String prefix) {
            return cluster ? builder.redisCluster(uri) : builder.redisUri(uri);
        }

        @Override
        public FencedLockClientBuilder asUser(FencedLockClientBuilder builder, String user, String password) {
            if (cluster) {
                return builder.redisCluster(uri.replace("redis://", "redis://" + user + ":" + password + "@"));
            }
            // On Sentinel only the data nodes check the user: the Sentinels' own addresses carry no credentials.
            RedisURI withUser = RedisURI.create(uri);
            withUser.setUsername(user);
            withUser.setPassword(password.toCharArray());
            return builder.redisUri(withUser);
        }

        @Override
        public boolean holds(String lockId) {
            Object exists = nodeOf.apply(lockId).call("EXISTS", lockId);
            return exists instanceof Long n ? n == 1L : Long.valueOf(1L).equals(((List<?>) exists).get(0));
        }

        @Override
        public long remainingMillis(String lockId) {
            Object ttl = nodeOf.apply(lockId).call("PTTL", lockId);
            return ttl instanceof Long n ? n : (Long) ((List<?>) ttl).get(0);
        }

        @Override
        public String clients(String lockId) {
            Object clients = nodeOf.apply(lockId).call("CLIENT", "LIST");
            return clients instanceof List<?> l ? String.valueOf(l.get(0)) : String.valueOf(clients);
        }

        @Override
        public void createUser(String user, String password, List<String> rules) {
            List<String> args = new ArrayList<>(List.of("ACL", "SETUSER", user, "reset", ">" + password));
            args.addAll(rules);
            for (Node node : nodes) {
                node.call(args.toArray(String[]::new));
            }
        }

        @Override
        public void deleteUser(String user) {
            for (Node node : nodes) {
                node.call("ACL", "DELUSER", user);
            }
        }

        @Override
        public void flushScripts() {
            for (Node node : nodes) {
                node.call("SCRIPT", "FLUSH");
            }
        }

        @Override
        public void close() {
            try {
                stop.close();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }

        @Override
        public String toString() {
            return uri;
        }
    }

    /** PostgreSQL: one server, a pool per isolation level, set as the sessions' default. */
    static final class PostgresEnvironment implements Environment {

        private static final PostgresLeaseTable TABLE = PostgresLeaseTable.named("fenced_lease_environments_c");

        private final ConnectionPool pool;

        PostgresEnvironment(String isolation) {
            pool = new ConnectionPool(ConnectionPoolConfiguration.builder(
                            ConnectionFactories.get(PostgresServerExtension.server().r2dbcUrl()))
                    .maxSize(8)
                    .postAllocate(c -> Mono.from(c.createStatement("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL "
                            + isolation).execute()).flatMap(r -> Mono.from(r.getRowsUpdated())).then())
                    .build());
            TABLE.create(pool).block(BOUND);
        }

        @Override
        public FencedLockClientBuilder target(FencedLockClientBuilder builder, String prefix) {
            return builder.postgres(pool, TABLE);
        }

        @Override
        public boolean holds(String lockId) {
            Long held = Flux.usingWhen(pool.create(),
                    c -> Flux.from(c.createStatement("SELECT count(*) FROM " + TABLE.name()
                                    + " WHERE lock_id = $1 AND owner IS NOT NULL AND expires_at > now()").bind(0, lockId).execute())
                            .concatMap(r -> r.map((row, meta) -> row.get(0, Long.class))),
                    Connection::close).blockFirst(BOUND);
            return held != null && held > 0;
        }

        @Override
        public long remainingMillis(String lockId) {
            Long left = Flux.usingWhen(pool.create(),
                    c -> Flux.from(c.createStatement("SELECT floor(extract(epoch FROM (expires_at - clock_timestamp())) * 1000)::bigint"
                                    + " FROM " + TABLE.name() + " WHERE lock_id = $1 AND owner IS NOT NULL").bind(0, lockId).execute())
                            .concatMap(r -> r.map((row, meta) -> row.get(0, Long.class))),
                    Connection::close).blockFirst(BOUND);
            return left == null ? -2 : left;
        }

        @Override
        public void close() {
            pool.disposeLater().block(BOUND);
        }

        @Override
        public String toString() {
            return "PostgreSQL, table " + TABLE.name();
        }
    }
}
