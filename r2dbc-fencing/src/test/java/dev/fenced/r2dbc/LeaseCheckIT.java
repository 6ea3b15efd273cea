package dev.fenced.r2dbc;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.FencedLockClientBuilder;
import dev.fenced.lock.PostgresLeaseTable;
import dev.fenced.lock.ReleaseOutcome;
import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.IsolationLevel;
import io.r2dbc.spi.R2dbcRollbackException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.r2dbc.connection.R2dbcTransactionManager;
import org.springframework.r2dbc.connection.TransactionAwareConnectionFactoryProxy;
import org.springframework.r2dbc.core.DatabaseClient;
import org.springframework.transaction.reactive.TransactionalOperator;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.test.StepVerifier;

/**
 * The lease check of fenced writes ({@link FencedWrite#checkLease}, {@link FenceTable#checkLease}) against leases of
 * a real lock client on PostgreSQL: valid leases write, leases the lease table no longer shows are refused before
 * anything is written (also where the fence alone would accept the write), the checked row holds off the next
 * acquirer until the write's transaction ends while the holder's renewals and release go on, on a connection of
 * the write's own and inside a Spring transaction.
 */
@ExtendWith(PostgresServerExtension.class)
class LeaseCheckIT {

    private static final Duration BOUND = Duration.ofSeconds(30);
    /** A table of its own, so that its LISTEN connections are this suite's alone. */
    private static final PostgresLeaseTable LEASES = PostgresLeaseTable.named("fenced_lease_check_it");
    private static final String NAME = "invoice:42";

    private final TestDatabase db;
    private final List<FencedLockClient> clients = new ArrayList<>();
    private final String prefix = "check-" + UUID.randomUUID() + ":";
    private String table;
    private FenceTable fence;

    LeaseCheckIT(PostgresServer server) {
        this.db = TestDatabase.postgres(server);
    }

    @BeforeEach
    void setUp() {
        LEASES.create(db.connections).block(BOUND);
        table = TestDatabase.uniqueName("invoices");
        db.execute("CREATE TABLE " + table + " (id bigint PRIMARY KEY, status text NOT NULL, fencing_token bigint, "
                + "fencing_owner text)", "INSERT INTO " + table + " (id, status) VALUES (42, 'OPEN')");
        fence = FenceTable.named(TestDatabase.uniqueName("fence"));
        fence.create(db.connections).block(BOUND);
    }

    @AfterEach
    void tearDown() {
        Collections.reverse(clients);
        clients.forEach(FencedLockClient::close);
        db.execute("DROP TABLE IF EXISTS " + table, "DROP TABLE IF EXISTS " + fence.name());
        db.close();
    }

    private FencedLockClient client(FencedLockClientBuilder builder) {
        FencedLockClient client = builder.postgres(db.connections, LEASES).keyPrefix(prefix).build();
        clients.add(client);
        return client;
    }

    /** A client whose leases outlive every test, so that nothing but the test changes their rows. */
    private FencedLockClient patientClient() {
        return client(FencedLockClient.builder().leaseTime(Duration.ofSeconds(60)).commandTimeout(Duration.ofSeconds(20)));
    }

    private String lockId() {
        return prefix + "{" + NAME + "}";
    }

    private FencedWrite settle(String status) {
        return FencedWrite.into(table).key("id", 42).set("status", status);
    }

    private List<Object> row() {
        return db.query("SELECT status, fencing_token, fencing_owner FROM " + table + " WHERE id = 42").get(0);
    }

    /** The holder's own view of its grant after a stall: it still believes the lease is held. */
    private static TestLease stalled(String keyPrefix, FencedLease lease) {
        return new TestLease(keyPrefix, lease.name(), lease.token(), lease.ownerId());
    }

    /** The database's clock has passed the lease's expiry (its holder stalled, its renewals stopped). */
    private void expireInTheDatabase() {
        assertThat(db.execute("UPDATE " + LEASES.name() + " SET expires_at = clock_timestamp() - interval '1 second' "
                + "WHERE lock_id = '" + lockId() + "'")).isEqualTo(1);
    }

    private long rowExpiryMillis() {
        return (Long) db.query("SELECT (extract(epoch FROM expires_at) * 1000)::bigint FROM " + LEASES.name()
                + " WHERE lock_id = '" + lockId() + "'").get(0).get(0);
    }

    private boolean anotherSessionWaitsFor(int pid) {
        return !db.query("SELECT pid FROM pg_stat_activity WHERE " + pid + " = ANY(pg_blocking_pids(pid))").isEmpty();
    }

    /** Polls {@code condition} on the test thread until it holds, for at most the bound. */
    private static void await(String what, BooleanSupplier condition) {
        long deadline = System.nanoTime() + BOUND.toNanos();
        while (!condition.getAsBoolean()) {
            assertThat(deadline - System.nanoTime()).as("still waiting for: " + what).isPositive();
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20));
        }
    }

    private String refusal(long token, String finding) {
        return "The lease on lock '" + NAME + "' (lock id " + lockId() + ") with fencing token " + token
                + " is not held in lease table " + LEASES.name() + ": " + finding + "; nothing was written";
    }

    /** A connection in a transaction of the test's, and its server process. */
    private record OpenTransaction(Connection connection, int pid) {

        static OpenTransaction begin(TestDatabase db) {
            Connection connection = Mono.from(db.connections.create()).block(BOUND);
            Mono.from(connection.beginTransaction()).block(BOUND);
            Integer pid = Flux.from(connection.createStatement("SELECT pg_backend_pid()").execute())
                    .flatMap(result -> result.map((row, meta) -> row.get(0, Integer.class)))
                    .blockFirst(BOUND);
            return new OpenTransaction(connection, pid);
        }

        void commit() {
            Mono.from(connection.commitTransaction()).then(Mono.from(connection.close())).block(BOUND);
        }
    }

    @Test
    void aValidLeaseWritesInTheTransactionOfItsCheck() {
        FencedLease lease = patientClient().acquire(NAME).block(BOUND);
        StepVerifier.create(settle("PAID").checkLease(LEASES).update(db.connections, lease)).expectNext(1L).verifyComplete();
        assertThat(row()).containsExactly("PAID", lease.token(), lease.ownerId());
        // Committed: the row lock of the check is gone, so the lock changes hands at once.
        StepVerifier.create(lease.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();
        FencedLease next = patientClient().tryAcquire(NAME).block(BOUND);
        assertThat(next).isNotNull();
        assertThat(next.token()).isGreaterThan(lease.token());
    }

    @Test
    void aNestedLeasePassesTheCheckOfItsEnclosingGrant() {
        FencedLockClient locks = patientClient();
        AtomicReference<FencedLease> outer = new AtomicReference<>();
        StepVerifier.create(locks.withLease(NAME, lease -> {
                    outer.set(lease);
                    return locks.withLease(NAME, inner -> settle("PAID").checkLease(LEASES).update(db.connections)
                            .map(rows -> Arrays.asList(rows, inner.token(), inner.ownerId())));
                }))
                .assertNext(written -> assertThat(written).containsExactly(1L, outer.get().token(), outer.get().ownerId()))
                .verifyComplete();
        assertThat(row()).containsExactly("PAID", outer.get().token(), outer.get().ownerId());
    }

    @Test
    void aLeaseExpiredInTheDatabaseIsRefusedWhereTheFenceAloneWouldAcceptIt() {
        FencedLease lease = patientClient().acquire(NAME).block(BOUND);
        TestLease holder = stalled(prefix, lease);
        expireInTheDatabase();

        StepVerifier.create(settle("PAID").checkLease(LEASES).update(db.connections, holder))
                .verifyErrorSatisfies(e -> {
                    assertThat(e).isInstanceOf(LeaseCheckFailedException.class)
                            .hasMessage(refusal(lease.token(), "its row expired by the database's clock"));
                    LeaseCheckFailedException refused = (LeaseCheckFailedException) e;
                    assertThat(refused.finding()).isEqualTo(LeaseCheckFailedException.Finding.EXPIRED);
                    assertThat(refused.lockName()).isEqualTo(NAME);
                    assertThat(refused.lockId()).isEqualTo(lockId());
                    assertThat(refused.token()).isEqualTo(lease.token());
                    assertThat(refused.storedToken()).isEqualTo(lease.token());
                    assertThat(refused.leaseTable()).isEqualTo(LEASES.name());
                });
        assertThat(row()).containsExactly("OPEN", null, null);
        // What the check adds: the fence alone accepts this write, since no newer holder has written.
        StepVerifier.create(settle("PAID").update(db.connections, holder)).expectNext(1L).verifyComplete();
        assertThat(row()).containsExactly("PAID", lease.token(), lease.ownerId());
    }

    @Test
    void aLeaseTakenByAnotherOwnerIsRefusedBeforeTheNewHolderHasWritten() {
        FencedLease first = patientClient().acquire(NAME).block(BOUND);
        TestLease stale = stalled(prefix, first);
        expireInTheDatabase();
        FencedLease second = patientClient().acquire(NAME).block(BOUND);
        assertThat(second.token()).isGreaterThan(first.token());

        StepVerifier.create(settle("VOID").checkLease(LEASES).update(db.connections, stale))
                .verifyErrorSatisfies(e -> {
                    assertThat(e).isInstanceOf(LeaseCheckFailedException.class)
                            .hasMessage(refusal(first.token(), "its row holds another grant, with token " + second.token()));
                    assertThat(((LeaseCheckFailedException) e).finding())
                            .isEqualTo(LeaseCheckFailedException.Finding.OTHER_GRANT);
                    assertThat(((LeaseCheckFailedException) e).storedToken()).isEqualTo(second.token());
                });
        assertThat(row()).containsExactly("OPEN", null, null);
        assertThat(stale.isHeld()).as("a refused check is not a fence rejection: the lease is not told").isTrue();
        StepVerifier.create(settle("PAID").checkLease(LEASES).update(db.connections, second)).expectNext(1L).verifyComplete();
        assertThat(row()).containsExactly("PAID", second.token(), second.ownerId());
    }

    @Test
    void aReleasedLeaseAndALeaseOfNoRowAreRefused() {
        FencedLease lease = patientClient().acquire(NAME).block(BOUND);
        StepVerifier.create(lease.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();
        StepVerifier.create(settle("PAID").checkLease(LEASES).upsert(db.connections, stalled(prefix, lease)))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(LeaseCheckFailedException.class)
                        .hasMessage(refusal(lease.token(), "its row is free (released)")));
        // A lease of another lock service (here, another key prefix) has no row in this table.
        TestLease elsewhere = new TestLease(NAME, 7, "owner-a");
        StepVerifier.create(settle("PAID").checkLease(LEASES).update(db.connections, elsewhere))
                .verifyErrorSatisfies(e -> {
                    assertThat(e).isInstanceOf(LeaseCheckFailedException.class).hasMessage("The lease on lock '" + NAME
                            + "' (lock id fenced:{" + NAME + "}) with fencing token 7 is not held in lease table "
                            + LEASES.name() + ": the table has no row for it; nothing was written");
                    assertThat(((LeaseCheckFailedException) e).storedToken()).isNull();
                });
        assertThat(row()).containsExactly("OPEN", null, null);
    }

    @Test
    void underRepeatableReadAGrantAfterTheSnapshotFailsTheCheckAsASerializationFailure() {
        FencedLease first = patientClient().acquire(NAME).block(BOUND);
        TestLease stale = stalled(prefix, first);
        Connection connection = Mono.from(db.connections.create()).block(BOUND);
        try {
            Mono.from(connection.beginTransaction(IsolationLevel.REPEATABLE_READ))
                    .thenMany(Flux.from(connection.createStatement("SELECT 1").execute()).flatMap(r -> r.getRowsUpdated()))
                    .blockLast(BOUND); // the transaction's snapshot, taken while the first lease held the row
            expireInTheDatabase();
            FencedLease second = patientClient().acquire(NAME).block(BOUND);
            assertThat(second.token()).isGreaterThan(first.token());
            // The snapshot still shows the first grant; the row lock sees the newer one and refuses to serialize.
            StepVerifier.create(settle("VOID").checkLease(LEASES).update(connection, stale))
                    .verifyErrorSatisfies(e -> {
                        assertThat(e).isInstanceOf(FencedWriteConflictException.class).hasMessage("The fenced write to "
                                + table + " (id = 42) under lock '" + NAME + "' conflicted with a concurrent transaction (the "
                                + "database could not serialize it, SQLSTATE 40001); nothing of it was accepted: roll the "
                                + "transaction back and retry it");
                        assertThat(((FencedWriteConflictException) e).sqlState()).isEqualTo("40001");
                        assertThat(e.getCause()).isInstanceOf(R2dbcRollbackException.class);
                    });
        } finally {
            Mono.from(connection.rollbackTransaction()).then(Mono.from(connection.close())).block(BOUND);
        }
        assertThat(row()).containsExactly("OPEN", null, null);
    }

    @Test
    void aCompetingAcquireWaitsUntilTheCheckedWriteCommits() throws Exception {
        FencedLease lease = patientClient().acquire(NAME).block(BOUND);
        OpenTransaction write = OpenTransaction.begin(db);
        StepVerifier.create(settle("PAID").checkLease(LEASES).update(write.connection(), lease)).expectNext(1L).verifyComplete();
        // The holder's release does not wait for its own open write.
        StepVerifier.create(lease.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();

        CompletableFuture<FencedLease> next = patientClient().acquire(NAME).toFuture();
        await("the competing acquire waits for the write's transaction", () -> anotherSessionWaitsFor(write.pid()));
        assertThat(next).isNotDone();
        assertThat(row()).as("not committed yet").containsExactly("OPEN", null, null);

        write.commit();
        FencedLease granted = next.get(BOUND.toSeconds(), TimeUnit.SECONDS);
        assertThat(granted.token()).isGreaterThan(lease.token());
        assertThat(row()).containsExactly("PAID", lease.token(), lease.ownerId());
        StepVerifier.create(settle("SHIPPED").checkLease(LEASES).update(db.connections, granted)).expectNext(1L).verifyComplete();
    }

    @Test
    void theHoldersRenewalsGoOnWhileItsCheckedWriteIsOpen() {
        Duration leaseTime = Duration.ofSeconds(3);
        FencedLease lease = client(FencedLockClient.builder().leaseTime(leaseTime)).acquire(NAME).block(BOUND);
        OpenTransaction write = OpenTransaction.begin(db);
        StepVerifier.create(settle("PAID").checkLease(LEASES).update(write.connection(), lease)).expectNext(1L).verifyComplete();
        long checkedExpiry = rowExpiryMillis();

        // Renewals (every second) move the row's expiry a whole lease time on while the write's row lock is held;
        // had they waited for it, they would have timed out and the lease would have expired.
        await("renewals during the open write", () -> rowExpiryMillis() >= checkedExpiry + leaseTime.toMillis());
        assertThat(lease.isHeld()).isTrue();
        assertThat(row()).as("not committed yet").containsExactly("OPEN", null, null);
        write.commit();
        assertThat(row()).containsExactly("PAID", lease.token(), lease.ownerId());
    }

    @Test
    void theCheckRunsInTheSpringTransactionOnItsConnection() throws Exception {
        FencedLease lease = patientClient().acquire(NAME).block(BOUND);
        DatabaseClient client = DatabaseClient.create(db.connections);
        TransactionalOperator transactions = TransactionalOperator.create(new R2dbcTransactionManager(db.connections));
        AtomicInteger pid = new AtomicInteger();
        CompletableFuture<Long> written = new CompletableFuture<>();
        Sinks.Empty<Void> commit = Sinks.empty();
        CompletableFuture<Long> work = client.sql("SELECT pg_backend_pid()").map(r -> r.get(0, Integer.class)).one()
                .doOnNext(pid::set)
                .then(settle("PAID").checkLease(LEASES).update(db.connections, lease))
                .doOnNext(written::complete)
                .flatMap(rows -> commit.asMono().thenReturn(rows))
                .as(transactions::transactional)
                .toFuture();
        assertThat(written.get(BOUND.toSeconds(), TimeUnit.SECONDS)).isEqualTo(1L);
        StepVerifier.create(lease.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();

        CompletableFuture<FencedLease> next = patientClient().acquire(NAME).toFuture();
        // The acquire waits for the transaction's own session: the check ran on its connection, not on one of its own.
        await("the competing acquire waits for the Spring transaction", () -> anotherSessionWaitsFor(pid.get()));
        assertThat(next).isNotDone();

        commit.tryEmitEmpty();
        assertThat(work.get(BOUND.toSeconds(), TimeUnit.SECONDS)).isEqualTo(1L);
        assertThat(next.get(BOUND.toSeconds(), TimeUnit.SECONDS).token()).isGreaterThan(lease.token());
        assertThat(row()).containsExactly("PAID", lease.token(), lease.ownerId());
    }

    @Test
    void aRefusedCheckRollsTheSpringTransactionBack() {
        FencedLease lease = patientClient().acquire(NAME).block(BOUND);
        TestLease stale = stalled(prefix, lease);
        expireInTheDatabase();
        DatabaseClient client = DatabaseClient.create(db.connections);
        TransactionalOperator transactions = TransactionalOperator.create(new R2dbcTransactionManager(db.connections));
        Mono<Long> work = client.sql("UPDATE " + table + " SET status = 'TOUCHED' WHERE id = 42").fetch().rowsUpdated()
                .then(settle("PAID").checkLease(LEASES).update(db.connections, stale));
        StepVerifier.create(work.as(transactions::transactional)).verifyError(LeaseCheckFailedException.class);
        assertThat(row()).containsExactly("OPEN", null, null);
    }

    @Test
    void aConnectionInAutoCommitModeIsRefusedBeforeAnySql() {
        FencedLease lease = patientClient().acquire(NAME).block(BOUND);
        StepVerifier.create(Mono.usingWhen(db.connections.create(),
                        c -> settle("PAID").checkLease(LEASES).update(c, lease), Connection::close))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(IllegalStateException.class)
                        .hasMessage("A fenced write of " + table + " checks its lease (checkLease) and needs a transaction: "
                                + "the connection is in auto-commit mode; begin a transaction first, or pass the "
                                + "ConnectionFactory"));
        assertThat(row()).containsExactly("OPEN", null, null);
    }

    @Test
    void theFenceTableChecksTheLeaseBeforeItAdvances() {
        FenceTable checked = fence.checkLease(LEASES);
        FencedLease lease = patientClient().acquire(NAME).block(BOUND);
        StepVerifier.create(checked.inTransaction(db.connections, lease, c -> Flux.from(c.createStatement(
                        "UPDATE " + table + " SET status = 'PAID' WHERE id = 42").execute()).flatMap(r -> r.getRowsUpdated())))
                .expectNext(1L)
                .verifyComplete();
        assertThat(db.query("SELECT last_token FROM " + fence.name())).containsExactly(List.of(lease.token()));

        TestLease stale = stalled(prefix, lease);
        expireInTheDatabase();
        AtomicInteger ran = new AtomicInteger();
        StepVerifier.create(checked.inTransaction(db.connections, stale, c -> Mono.fromRunnable(ran::incrementAndGet)))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(LeaseCheckFailedException.class)
                        .hasMessage(refusal(lease.token(), "its row expired by the database's clock")));
        assertThat(ran).hasValue(0);
        assertThat(checked.toString()).isEqualTo("FenceTable{" + fence.name() + ", rule=SAME_LEASE_OR_NEWER, checkLease="
                + LEASES.name() + "}");
    }

    @Test
    void aCheckedWriteThroughATransactionAwareProxyJoinsTheCallersTransaction() {
        FencedLease lease = patientClient().acquire(NAME).block(BOUND);
        TransactionalOperator transactions = TransactionalOperator.create(new R2dbcTransactionManager(db.connections));
        Mono<Long> work = settle("PAID").checkLease(LEASES)
                .update(new TransactionAwareConnectionFactoryProxy(db.connections), lease)
                .then(Mono.error(new IllegalStateException("the caller fails after the checked write")));
        StepVerifier.create(work.as(transactions::transactional)).verifyErrorMessage("the caller fails after the checked write");
        assertThat(row()).containsExactly("OPEN", null, null);
    }

    @Test
    void aCheckedWriteOnAConnectionAlreadyInATransactionNeitherBeginsNorCommits() {
        FencedLease lease = patientClient().acquire(NAME).block(BOUND);
        Connection transaction = db.readFirstIn(IsolationLevel.READ_COMMITTED, "SELECT status FROM " + table);
        try {
            StepVerifier.create(settle("PAID").checkLease(LEASES).update(HandedOutConnection.factory(transaction, db.connections),
                    lease)).expectNext(1L).verifyComplete();
        } finally {
            TestDatabase.rollBackAndClose(transaction);
        }
        assertThat(row()).containsExactly("OPEN", null, null);
    }
}
