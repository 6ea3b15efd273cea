package dev.fenced.lock.internal.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.FencedLockClientBuilder;
import dev.fenced.lock.LockServiceException;
import dev.fenced.lock.PostgresLeaseTable;
import dev.fenced.lock.ReleaseOutcome;
import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.lock.internal.LeaseStore.AcquireReply;
import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import dev.fenced.testservices.TcpProxy;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.postgresql.PostgresqlConnectionConfiguration;
import io.r2dbc.postgresql.PostgresqlConnectionFactory;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

/**
 * The PostgreSQL store at its edges, against the real database and a proxy that cuts or silences one
 * connection: a reset while an acquire waits on a row lock, a silent pooled connection under a short lease, a
 * pool whose default isolation is {@code REPEATABLE READ} or {@code SERIALIZABLE}, and {@code close()} with
 * leases held. Each case asserts what the database holds afterwards, not how long anything took.
 *
 * <p>An acquire that its client gave up on is stopped by three defences, and each has a test that fails
 * without it (the others alone would pass it):
 * <ul>
 *   <li>the cancel request on a failure: {@code anAcquireWhoseConnectionIsResetWhileItWaitsOnARowLock…};</li>
 *   <li>the statement's own {@code lock_timeout} (the wait ends in the database while the row is still held, with
 *       no cancel delivered): {@code aResetAcquireWhoseCancelCouldNotBeSentStopsWaiting…} and
 *       {@code anAcquireThatWaitsOnARowLockLongerThanTheCommandTimeout…};</li>
 *   <li>the grant's clock bound ({@code clock_timestamp() < statement_timestamp() + $5}, checked once the row is
 *       locked): {@code anAcquireStatementThatGetsTheRowAfterItsBoundHasPassed…}, which runs the store's
 *       statement itself with a {@code $5} that turns its {@code lock_timeout} off, so that only the bound
 *       decides, whenever the test ends the wait. (A test through the client would need the row freed between
 *       the command timeout and the {@code lock_timeout}, 250 ms later: a race, not a test.)</li>
 * </ul>
 * The undo repeated over the late-grant window, also by {@code close()}, has
 * {@code aLateGrantOfAnAcquireWhoseCancelCouldNotBeSentIsUndone} and
 * {@code closeInsideTheUndoWindowOfAnAcquireWhoseCancelCouldNotBeSentLeavesTheLockFree}.
 */
@ExtendWith(PostgresServerExtension.class)
class PostgresStoreFaultsIT {

    private static final Duration BOUND = Duration.ofSeconds(30);
    /** A table of its own: its rows, channel and statements are this suite's alone. */
    private static final String TABLE = "fenced_lease_faults_it";
    private static final String WAITING_ACQUIRES = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            + " AND query LIKE '%INSERT INTO \"" + TABLE + "\"%'";
    private static final String RUNNING_ACQUIRES = "SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
            + " AND pid <> pg_backend_pid() AND query LIKE '%INSERT INTO \"" + TABLE + "\"%'";

    private PostgresServer postgres;
    private ConnectionPool direct;
    private TcpProxy proxy;
    private String prefix;
    private final List<AutoCloseable> closing = new ArrayList<>();

    @BeforeEach
    void setUp(PostgresServer server) {
        postgres = server;
        direct = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(server.r2dbcUrl()))
                .maxSize(4).build());
        PostgresLeaseTable.named(TABLE).create(direct).block(BOUND);
        proxy = TcpProxy.start(server.host(), server.port());
        prefix = "faults-" + UUID.randomUUID() + ":";
    }

    @AfterEach
    void tearDown() throws Exception {
        proxy.resume();
        Collections.reverse(closing);
        for (AutoCloseable c : closing) {
            c.close();
        }
        proxy.close();
        direct.disposeLater().block(BOUND);
    }

    /** A pool of {@code size} connections through the proxy, whose sessions default to {@code isolation}. */
    private ConnectionPool proxiedPool(int size, String isolation) {
        PostgresqlConnectionConfiguration.Builder config = PostgresqlConnectionConfiguration.builder()
                .host(proxy.host()).port(proxy.port()).database(postgres.database()).username(postgres.username())
                .options(Map.of("default_transaction_isolation", isolation));
        if (!postgres.password().isEmpty()) {
            config.password(postgres.password());
        }
        ConnectionPool pool = new ConnectionPool(ConnectionPoolConfiguration.builder(new PostgresqlConnectionFactory(config.build()))
                .initialSize(size).maxSize(size).build());
        closing.add(() -> pool.disposeLater().block(BOUND));
        pool.warmup().block(BOUND);
        return pool;
    }

    /** A store over a pool of two connections through the proxy, with the given command timeout. */
    private PostgresLeaseStore proxiedStore(Duration commandTimeout) {
        ConnectionPool pool = proxiedPool(2, "read committed");
        ClientSettings settings = ClientSettings.of(prefix, Duration.ofSeconds(30), null, Duration.ofSeconds(30),
                commandTimeout, null);
        closing.add(() -> settings.scheduler().dispose());
        PostgresLeaseStore store = PostgresLeaseStore.open(pool, TABLE, settings);
        closing.add(() -> store.close().block(BOUND));
        return store;
    }

    /**
     * A client through the proxy with a lease of 60 s and a command timeout of 8 s: a late grant would hold the
     * lock long after the test, and a failed acquire's undo window (9 s) outlasts the test's steps.
     */
    private FencedLockClient proxiedClientWithALongWindow() {
        return client(proxiedPool(4, "read committed"), FencedLockClient.builder().leaseTime(Duration.ofSeconds(60))
                .commandTimeout(Duration.ofSeconds(8)));
    }

    private FencedLockClient client(ConnectionFactory pool, FencedLockClientBuilder builder) {
        FencedLockClient client = builder.postgres(pool, PostgresLeaseTable.named(TABLE)).keyPrefix(prefix).build();
        closing.add(client::close);
        return client;
    }

    private String lockId(String name) {
        return prefix + "{" + name + "}";
    }

    private <T> List<T> sql(String sql, Class<T> type, Object... args) {
        return Flux.usingWhen(direct.create(), c -> {
            Statement statement = c.createStatement(sql);
            for (int i = 0; i < args.length; i++) {
                statement.bind(i, args[i]);
            }
            return Flux.from(statement.execute()).concatMap(r -> r.map((row, meta) -> row.get(0, type)));
        }, Connection::close).collectList().block(BOUND);
    }

    private long count(String sql, Object... args) {
        return sql(sql, Long.class, args).get(0);
    }

    /** Polls {@code condition} on the test thread until it holds, for at most the bound. */
    private static void await(String what, BooleanSupplier condition) {
        long deadline = System.nanoTime() + BOUND.toNanos();
        while (!condition.getAsBoolean()) {
            assertThat(deadline - System.nanoTime()).as("still waiting for: " + what).isPositive();
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20));
        }
    }

    /** Polls {@code condition} for at most {@code bound}; the caller asserts what it needs afterwards. */
    private static void waitAtMost(Duration bound, BooleanSupplier condition) {
        long deadline = System.nanoTime() + bound.toNanos();
        while (!condition.getAsBoolean() && deadline - System.nanoTime() > 0) {
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20));
        }
    }

    /** A lock whose row exists and is free, as after any release. */
    private void freeRow(String name) {
        try (FencedLockClient once = FencedLockClient.builder().postgres(direct, PostgresLeaseTable.named(TABLE))
                .keyPrefix(prefix).build()) {
            FencedLease lease = once.acquire(name).block(BOUND);
            assertThat(lease).isNotNull();
            assertThat(lease.release().block(BOUND)).isEqualTo(ReleaseOutcome.RELEASED);
        }
    }

    /** A transaction on a connection of its own that holds the lock's row as r2dbc-fencing's lease check does. */
    private Connection holdRowForKeyShare(String name) {
        Connection blocker = Mono.from(direct.create()).block(BOUND);
        closing.add(() -> Mono.from(blocker.close()).block(BOUND));
        Mono.from(blocker.beginTransaction()).block(BOUND);
        Flux.from(blocker.createStatement("SELECT token FROM " + TABLE + " WHERE lock_id = $1 FOR KEY SHARE")
                .bind(0, lockId(name)).execute()).flatMap(r -> r.map((row, meta) -> 1)).blockLast(BOUND);
        return blocker;
    }

    /**
     * Gives a waiting acquire {@code settle} to leave its lock wait, ends the blocking transaction, lets whatever
     * still runs finish, and asserts that {@code owner} was not granted the lock.
     */
    private void assertNoGrantOnceTheRowIsFree(Connection blocker, Duration settle, String name, String owner, String why) {
        waitAtMost(settle, () -> count(WAITING_ACQUIRES) == 0);
        Mono.from(blocker.commitTransaction()).block(BOUND);
        waitAtMost(Duration.ofSeconds(10), () -> count(RUNNING_ACQUIRES) == 0);
        assertThat(count("SELECT count(*) FROM " + TABLE + " WHERE lock_id = $1 AND owner = $2", lockId(name), owner))
                .as(why).isZero();
    }

    private Throwable failureOf(CompletableFuture<?> future) throws Exception {
        try {
            future.get(BOUND.toSeconds(), TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            return e.getCause();
        }
        throw new AssertionError("expected a failure, got " + future.get());
    }

    /**
     * Holds the free row of {@code name} ({@link #holdRowForKeyShare}), starts an acquire of it ({@code start}),
     * whose request contains {@code marker}, waits until it waits on the row lock, and resets its connection
     * while new connections are refused, so that its cancel request cannot be sent and the statement lives on in
     * the database (PostgreSQL does not notice a reset while the backend waits on a row lock). New connections
     * stay refused. Returns the blocker once the acquire has failed.
     */
    private Connection resetAWaitingAcquireWhoseCancelCannotBeSent(String name, String marker,
            Supplier<CompletableFuture<?>> start) throws Exception {
        freeRow(name);
        Connection blocker = holdRowForKeyShare(name);
        proxy.markRequestContaining(marker);
        CompletableFuture<?> acquire = start.get();
        await("the acquire waits on the row lock", () -> count(WAITING_ACQUIRES) == 1);
        proxy.refuseNew(true);
        assertThat(proxy.resetMarked()).isEqualTo(1);
        assertThat(failureOf(acquire)).isInstanceOf(LockServiceException.class);
        return blocker;
    }

    @Test
    void anAcquireWhoseConnectionIsResetWhileItWaitsOnARowLockGrantsNothingAndNamesTheReset() throws Exception {
        String name = "reset-waiting";
        freeRow(name);
        PostgresLeaseStore store = proxiedStore(Duration.ofSeconds(8));
        Connection blocker = holdRowForKeyShare(name);
        String ghost = "ghost-" + UUID.randomUUID();

        proxy.markRequestContaining(ghost);
        CompletableFuture<AcquireReply> acquire = store.acquire(name, ghost, 30_000, 0).toFuture();
        await("the acquire waits on the row lock", () -> count(WAITING_ACQUIRES) == 1);
        assertThat(proxy.resetMarked()).isEqualTo(1);

        Throwable failure = failureOf(acquire);
        assertThat(failure).isInstanceOf(LockServiceException.class)
                .hasMessage("Lock service failed to acquire for lock 'reset-waiting': the connection to PostgreSQL was lost"
                        + " ([08006] An I/O error occurred while sending to the backend or receiving from the backend)");
        // The backend of a reset connection goes on waiting unless the acquire was cancelled in the database.
        assertNoGrantOnceTheRowIsFree(blocker, Duration.ofSeconds(5), name, ghost,
                "the acquire whose connection was reset must not grant the lock once the row is free");
    }

    @Test
    void aLateGrantOfAnAcquireWhoseCancelCouldNotBeSentIsUndone() throws Exception {
        String name = "reset-uncancelled";
        FencedLockClient client = proxiedClientWithALongWindow();
        Connection blocker = resetAWaitingAcquireWhoseCancelCannotBeSent(name, lockId(name),
                () -> client.tryAcquire(name).toFuture());
        // Give the undo time to run once on a pooled connection and find nothing (an ordering of the set-up, not
        // an assertion): the statement still waits on the row, and is granted when the row is free.
        LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(500));
        Mono.from(blocker.commitTransaction()).block(BOUND);
        proxy.refuseNew(false);

        FencedLockClient rival = client(direct, FencedLockClient.builder());
        await("the lock is free again", () -> {
            FencedLease lease = rival.tryAcquire(name).block(BOUND);
            return lease != null && lease.release().block(BOUND) == ReleaseOutcome.RELEASED;
        });
    }

    @Test
    void closeInsideTheUndoWindowOfAnAcquireWhoseCancelCouldNotBeSentLeavesTheLockFree() throws Exception {
        String name = "close-in-undo-window";
        FencedLockClient client = proxiedClientWithALongWindow();
        Connection blocker = resetAWaitingAcquireWhoseCancelCannotBeSent(name, lockId(name),
                () -> client.tryAcquire(name).toFuture());
        proxy.refuseNew(false);

        // Closed while the failed acquire may still take the lock: close must not end its undo early.
        client.close();
        Mono.from(blocker.commitTransaction()).block(BOUND);
        waitAtMost(Duration.ofSeconds(10), () -> count(RUNNING_ACQUIRES) == 0);

        FencedLockClient rival = client(direct, FencedLockClient.builder());
        StepVerifier.create(rival.tryAcquire(name).flatMap(FencedLease::release))
                .as("no grant of the closed client's failed acquire holds the lock for nobody")
                .expectNext(ReleaseOutcome.RELEASED).expectComplete().verify(BOUND);
    }

    @Test
    void anAcquireThatWaitsOnARowLockLongerThanTheCommandTimeoutEndsInTheDatabase() throws Exception {
        String name = "bounded-wait";
        freeRow(name);
        PostgresLeaseStore store = proxiedStore(Duration.ofSeconds(1));
        Connection blocker = holdRowForKeyShare(name);
        String ghost = "ghost-" + UUID.randomUUID();

        CompletableFuture<AcquireReply> acquire = store.acquire(name, ghost, 30_000, 0).toFuture();
        await("the acquire waits on the row lock", () -> count(WAITING_ACQUIRES) == 1);
        // Nothing from the client reaches the database any more: no cancel, no close. The statement must end itself.
        proxy.refuseNew(true);
        proxy.blackhole();
        assertThat(failureOf(acquire)).isInstanceOf(LockServiceException.class);
        // The blocker still holds the row: only the statement's own lock_timeout can end its wait.
        await("the acquire stops waiting in the database while the row is still held", () -> count(WAITING_ACQUIRES) == 0);
        assertNoGrantOnceTheRowIsFree(blocker, Duration.ZERO, name, ghost,
                "an acquire that waited past its command timeout must not grant the lock");
    }

    @Test
    void aResetAcquireWhoseCancelCouldNotBeSentStopsWaitingInTheDatabaseWhileTheRowIsStillHeld() throws Exception {
        String name = "reset-bounded-wait";
        PostgresLeaseStore store = proxiedStore(Duration.ofSeconds(1));
        String ghost = "ghost-" + UUID.randomUUID();

        // New connections stay refused for the rest of the test: no cancel ever arrives.
        Connection blocker = resetAWaitingAcquireWhoseCancelCannotBeSent(name, ghost,
                () -> store.acquire(name, ghost, 30_000, 0).toFuture());
        // The blocker's transaction stays open until the wait has ended: only the statement's own lock_timeout
        // can end it.
        await("the reset acquire stops waiting in the database while the row is still held",
                () -> count(WAITING_ACQUIRES) == 0);
        assertNoGrantOnceTheRowIsFree(blocker, Duration.ZERO, name, ghost,
                "the reset acquire must not grant the lock once the row is free");
    }

    @Test
    void anAcquireStatementThatGetsTheRowAfterItsBoundHasPassedGrantsNothing() throws Exception {
        String name = "past-the-bound";
        freeRow(name);
        Connection blocker = holdRowForKeyShare(name);
        Connection raw = Mono.from(direct.create()).block(BOUND);
        closing.add(() -> Mono.from(raw.close()).block(BOUND));
        String ghost = "ghost-" + UUID.randomUUID();

        // The store's own statement, with the command timeout ($5) at minus the lock_timeout margin: its
        // lock_timeout is then 0 (none), so only the blocker's commit ends its wait, and its clock bound
        // (clock_timestamp() < statement_timestamp() + $5) has passed by then, whenever the test commits.
        long commandTimeoutMillis = -PostgresLeaseStore.LOCK_TIMEOUT_MARGIN_MILLIS;
        CompletableFuture<List<Boolean>> replies = Flux.from(raw.createStatement(PostgresLeaseStore.acquireSql(
                                PostgresLeaseStore.quote(TABLE), false))
                        .bind(0, lockId(name)).bind(1, ghost).bind(2, 30_000L).bind(3, 0L).bind(4, commandTimeoutMillis)
                        .execute())
                .flatMap(r -> r.map((row, meta) -> Boolean.TRUE.equals(row.get("acquired", Boolean.class))))
                .collectList().toFuture();
        await("the statement waits on the row lock", () -> count(WAITING_ACQUIRES) == 1);
        Mono.from(blocker.commitTransaction()).block(BOUND);

        assertThat(replies.get(BOUND.toSeconds(), TimeUnit.SECONDS)).as("the statement's reply: busy").containsExactly(false);
        assertThat(count("SELECT count(*) FROM " + TABLE + " WHERE lock_id = $1 AND owner = $2", lockId(name), ghost))
                .as("a statement that got the row after its bound must not grant the lock").isZero();
    }

    @Test
    void aRenewalOnASilentPooledConnectionIsRetriedOnAnotherBeforeAShortLeaseRunsOut() {
        String name = "silent-renewal";
        ConnectionPool pool = proxiedPool(4, "read committed");
        FencedLockClient client = client(pool, FencedLockClient.builder().leaseTime(Duration.ofSeconds(3)));
        FencedLease lease = client.acquire(name).block(BOUND);
        assertThat(lease).isNotNull();
        String expiry = "SELECT (extract(epoch FROM expires_at) * 1000)::bigint FROM " + TABLE + " WHERE lock_id = $1";
        long granted = sql(expiry, Long.class, lockId(name)).get(0);

        // The next statement about this lock (its renewal) meets a connection that never answers.
        proxy.holdRequestContaining(lockId(name));
        await("the renewal is held", () -> proxy.heldConnections() == 1);
        await("a renewal on another connection", () -> sql(expiry, Long.class, lockId(name)).get(0) > granted);
        assertThat(lease.isHeld()).as("the lease survived the silent connection").isTrue();
        StepVerifier.create(lease.release()).expectNext(ReleaseOutcome.RELEASED).expectComplete().verify(BOUND);
    }

    @Test
    void contendedAcquiresAtRepeatableReadNeverFailAndKeepTheTokenOrder() {
        contendedAcquiresNeverFail("repeatable read");
    }

    @Test
    void contendedAcquiresAtSerializableNeverFailAndKeepTheTokenOrder() {
        contendedAcquiresNeverFail("serializable");
    }

    /** Four clients take one lock in turns, hand-over after hand-over, through a pool of the given default isolation. */
    private void contendedAcquiresNeverFail(String isolation) {
        String name = "contended";
        ConnectionPool pool = proxiedPool(8, isolation);
        List<Long> tokens = Collections.synchronizedList(new ArrayList<>());
        List<FencedLockClient> clients = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            clients.add(client(pool, FencedLockClient.builder().leaseTime(Duration.ofSeconds(10))));
        }
        AcquireOptions patient = AcquireOptions.defaults().withMaxWait(BOUND);
        Flux.fromIterable(clients)
                .flatMap(c -> Flux.range(0, 15).concatMap(i -> c.withLease(name, patient, lease -> Mono.fromRunnable(
                        () -> tokens.add(lease.token())))))
                .then()
                .as(StepVerifier::create)
                .expectComplete()
                .verify(BOUND.multipliedBy(2));
        assertThat(tokens).hasSize(60).isSorted().doesNotHaveDuplicates();
    }

    @Test
    void closeReleasesEveryHeldLeaseSoAnotherClientGetsItAtOnce() {
        FencedLockClient holder = client(direct, FencedLockClient.builder().leaseTime(Duration.ofSeconds(60)));
        List<String> names = List.of("closed-a", "closed-b", "closed-c");
        for (String name : names) {
            assertThat(holder.acquire(name).block(BOUND)).isNotNull();
        }
        holder.close();
        assertThat(count("SELECT count(*) FROM " + TABLE + " WHERE lock_id = ANY($1) AND owner IS NOT NULL",
                (Object) names.stream().map(this::lockId).toArray(String[]::new)))
                .as("no row keeps an owner after close").isZero();
        FencedLockClient next = client(direct, FencedLockClient.builder());
        for (String name : names) {
            StepVerifier.create(next.tryAcquire(name).flatMap(FencedLease::release))
                    .as(name).expectNext(ReleaseOutcome.RELEASED).expectComplete().verify(BOUND);
        }
    }
}
