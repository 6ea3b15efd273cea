package dev.fenced.r2dbc;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.LeaseNotHeldException;
import dev.fenced.lock.StaleFencingTokenException;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;
import java.util.stream.LongStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.r2dbc.connection.R2dbcTransactionManager;
import org.springframework.r2dbc.core.DatabaseClient;
import org.springframework.transaction.reactive.TransactionalOperator;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

/**
 * The contract of token-guarded UPDATE, UPSERT and claim, run against every supported database
 * ({@link FencedWriteIT} on PostgreSQL, {@link FencedWriteMariaDbIT} on MariaDB): the rule, stale against missing
 * rows, the seed's token column alone, the claim step, and Spring transactions.
 */
abstract class FencedWriteContract {

    private static final Duration BOUND = Duration.ofSeconds(30);

    final TestDatabase db;
    String table;

    FencedWriteContract(TestDatabase db) {
        this.db = db;
    }

    /** A bind marker of the test's own SQL. */
    String marker(int oneBased) {
        return db.mariaDb ? "?" : "$" + oneBased;
    }

    /** An identifier as the library quotes it in messages. */
    String quoted(String name) {
        return db.mariaDb ? "`" + name + "`" : "\"" + name + "\"";
    }

    @BeforeEach
    void setUp() {
        table = TestDatabase.uniqueName("invoices");
        db.execute("CREATE TABLE " + table + " (id bigint PRIMARY KEY, status text NOT NULL, amount bigint NOT NULL, "
                + "fencing_token bigint, fencing_owner text)");
        db.execute("INSERT INTO " + table + " (id, status, amount) VALUES (42, 'OPEN', 0)");
    }

    @AfterEach
    void tearDown() {
        db.execute("DROP TABLE IF EXISTS " + table);
        db.close();
    }

    FencedWrite invoice(long id, String status, long amount) {
        return FencedWrite.into(table).key("id", id).set("status", status).set("amount", amount);
    }

    private List<Object> row(long id) {
        List<List<Object>> rows = db.query("SELECT status, amount, fencing_token, fencing_owner FROM " + table + " WHERE id = " + id);
        assertThat(rows).hasSize(1);
        return rows.get(0);
    }

    @Test
    void freshLeaseWritesTheValuesWithItsTokenAndOwner() {
        TestLease lease = new TestLease("invoice:42", 7, "owner-a");
        StepVerifier.create(invoice(42, "PAID", 100).update(db.connections, lease)).expectNext(1L).verifyComplete();
        assertThat(row(42)).containsExactly("PAID", 100L, 7L, "owner-a");
    }

    @Test
    void sameLeaseMayWriteTheRowTwiceByDefault() {
        TestLease lease = new TestLease("invoice:42", 7, "owner-a");
        StepVerifier.create(invoice(42, "PAID", 100).update(db.connections, lease)).expectNext(1L).verifyComplete();
        StepVerifier.create(invoice(42, "SHIPPED", 100).update(db.connections, lease)).expectNext(1L).verifyComplete();
        assertThat(row(42)).containsExactly("SHIPPED", 100L, 7L, "owner-a");
    }

    @Test
    void strictRuleRejectsTheSecondWriteOfTheSameLeaseWithoutLosingIt() {
        TestLease lease = new TestLease("invoice:42", 7, "owner-a");
        FencedWrite strict = invoice(42, "PAID", 100).rule(FencingRule.STRICTLY_NEWER);
        StepVerifier.create(strict.update(db.connections, lease)).expectNext(1L).verifyComplete();
        StepVerifier.create(strict.update(db.connections, lease))
                .verifyErrorSatisfies(e -> {
                    assertThat(e).isInstanceOf(StaleFencingTokenException.class);
                    StaleFencingTokenException stale = (StaleFencingTokenException) e;
                    assertThat(stale.presentedToken()).isEqualTo(7);
                    assertThat(stale.storedToken()).isEqualTo(7);
                    assertThat(stale).hasMessageEndingWith("storage holds token 7 from this same lease (the strict rule "
                            + "accepts one write per token)");
                });
        assertThat(lease.reportedNewerToken).as("no newer holder: the lease stays").hasValue(-1);
        assertThat(lease.isHeld()).isTrue();
    }

    @Test
    void sameTokenFromAnotherOwnerIsRejected() {
        // A lock service that lost its data can re-issue token 7 to another owner.
        TestLease first = new TestLease("invoice:42", 7, "owner-a");
        TestLease reissued = new TestLease("invoice:42", 7, "owner-b");
        StepVerifier.create(invoice(42, "PAID", 100).update(db.connections, first)).expectNext(1L).verifyComplete();
        StepVerifier.create(invoice(42, "VOID", 0).update(db.connections, reissued))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(StaleFencingTokenException.class)
                        .hasMessage("Write to " + table + " (id = 42) with fencing token 7 of lock 'invoice:42' was "
                                + "rejected: storage holds token 7 from another owner"));
        assertThat(row(42)).containsExactly("PAID", 100L, 7L, "owner-a");
        assertThat(reissued.reportedNewerToken).hasValue(7);
    }

    @Test
    void olderTokenIsRejectedWithBothTokensAndTheLeaseIsTold() {
        StepVerifier.create(invoice(42, "PAID", 100).update(db.connections, new TestLease("invoice:42", 9, "b")))
                .expectNext(1L).verifyComplete();
        TestLease stale = new TestLease("invoice:42", 8, "a");
        StepVerifier.create(invoice(42, "VOID", 0).update(db.connections, stale))
                .verifyErrorSatisfies(e -> {
                    StaleFencingTokenException rejected = (StaleFencingTokenException) e;
                    assertThat(rejected.lockName()).isEqualTo("invoice:42");
                    assertThat(rejected.presentedToken()).isEqualTo(8);
                    assertThat(rejected.storedToken()).isEqualTo(9);
                    assertThat(rejected.storedOwner()).isEqualTo("b");
                });
        assertThat(stale.reportedNewerToken).hasValue(9);
        assertThat(row(42)).containsExactly("PAID", 100L, 9L, "b");
    }

    @Test
    void missingRowIsNotReportedAsStale() {
        StepVerifier.create(invoice(404, "PAID", 1).update(db.connections, new TestLease("invoice:404", 1, "a")))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(FencedRowNotFoundException.class)
                        .hasMessage("No row to update in " + table + " (id = 404) (write under lock 'invoice:404')"));
    }

    @Test
    void upsertInsertsAMissingRowThenGuardsIt() {
        StepVerifier.create(invoice(7, "OPEN", 5).upsert(db.connections, new TestLease("invoice:7", 3, "a")))
                .expectNext(1L).verifyComplete();
        StepVerifier.create(invoice(7, "PAID", 5).upsert(db.connections, new TestLease("invoice:7", 4, "b")))
                .expectNext(1L).verifyComplete();
        StepVerifier.create(invoice(7, "VOID", 0).upsert(db.connections, new TestLease("invoice:7", 3, "a")))
                .verifyErrorSatisfies(e -> assertThat(((StaleFencingTokenException) e).storedToken()).isEqualTo(4));
        assertThat(row(7)).containsExactly("PAID", 5L, 4L, "b");
    }

    @Test
    void leaseThatIsNotHeldIsRefusedBeforeAnySql() {
        TestLease released = new TestLease("invoice:42", 7, "a");
        released.release().block();
        // The table does not exist: any SQL sent would fail differently.
        StepVerifier.create(FencedWrite.into("no_such_table").key("id", 1).set("x", 1).update(db.connections, released))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(LeaseNotHeldException.class)
                        .hasMessage("The lease on lock 'invoice:42' with fencing token 7 is not held (released, lost or past "
                                + "its deadline); the write was not sent"));
    }

    @Test
    void missingTokenColumnIsNamed() {
        String plain = TestDatabase.uniqueName("plain");
        db.execute("CREATE TABLE " + plain + " (id bigint PRIMARY KEY, status text)", "INSERT INTO " + plain + " VALUES (1, 'x')");
        try {
            StepVerifier.create(FencedWrite.into(plain).key("id", 1).set("status", "y").update(db.connections, new TestLease("p", 1, "a")))
                    .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(IllegalStateException.class)
                            .hasMessageContaining("token " + quoted("fencing_token") + " (bigint)")
                            .hasMessageContaining("fencing_token"));
        } finally {
            db.execute("DROP TABLE " + plain);
        }
    }

    @Test
    void writeOutsideALeaseScopeSaysHowToProvideOne() {
        StepVerifier.create(invoice(42, "PAID", 1).update(db.connections))
                .verifyErrorMessage("A fenced write of " + table + " needs a lease, and the Reactor Context holds none: run it "
                        + "inside FencedLockClient.withLease(...), or pass the lease");
    }

    @Test
    void concurrentWritersWithInterleavedTokensLeaveTheNewestAcceptedWrite() {
        String audit = TestDatabase.uniqueName("audit");
        db.execute("CREATE TABLE " + audit + " (seq " + db.autoIncrementKey() + ", token bigint NOT NULL)");
        try {
            List<Long> tokens = LongStream.rangeClosed(1, 32).boxed().collect(Collectors.toCollection(ArrayList::new));
            Collections.shuffle(tokens, new java.util.Random(7));
            List<Throwable> rejections = new CopyOnWriteArrayList<>();
            Flux<Long> writers = Flux.fromIterable(tokens).flatMap(token -> {
                TestLease lease = new TestLease("invoice:42", token, "owner-" + token);
                FencedWrite write = invoice(42, "BY-" + token, token);
                // The fenced write and its audit row commit together, or not at all.
                return Flux.usingWhen(db.connections.create(),
                                c -> Flux.usingWhen(Mono.from(c.beginTransaction()).thenReturn(c),
                                        tx -> write.update(tx, lease).then(insertAudit(tx, audit, token)).thenReturn(token),
                                        Connection::commitTransaction,
                                        (tx, e) -> tx.rollbackTransaction(),
                                        Connection::rollbackTransaction),
                                Connection::close)
                        .onErrorResume(e -> {
                            rejections.add(e);
                            return Mono.empty();
                        });
            }, 32);
            List<Long> accepted = writers.collectList().block(BOUND);

            assertThat(rejections).allSatisfy(e -> assertThat(e).isInstanceOf(StaleFencingTokenException.class));
            assertThat(accepted.size() + rejections.size()).isEqualTo(32);
            List<Long> committed = db.query("SELECT token FROM " + audit + " ORDER BY seq").stream()
                    .map(r -> (Long) r.get(0)).collect(Collectors.toList());
            assertThat(committed).containsExactlyInAnyOrderElementsOf(accepted);
            assertThat(committed).isSorted();
            long newest = Collections.max(committed);
            assertThat(newest).isEqualTo(32);
            assertThat(row(42)).containsExactly("BY-32", 32L, 32L, "owner-32");
        } finally {
            db.execute("DROP TABLE IF EXISTS " + audit);
        }
    }

    private Mono<Void> insertAudit(Connection c, String audit, long token) {
        return Flux.from(c.createStatement("INSERT INTO " + audit + " (token) VALUES (" + marker(1) + ")").bind(0, token).execute())
                .flatMap(io.r2dbc.spi.Result::getRowsUpdated)
                .then();
    }

    @Test
    void writesAreObservations() {
        io.micrometer.observation.tck.TestObservationRegistry observations = io.micrometer.observation.tck.TestObservationRegistry.create();
        StepVerifier.create(invoice(42, "PAID", 1).observe(observations).update(db.connections, new TestLease("invoice:42", 9, "b")))
                .expectNext(1L).verifyComplete();
        StepVerifier.create(invoice(42, "VOID", 0).observe(observations).update(db.connections, new TestLease("invoice:42", 8, "a")))
                .verifyError(StaleFencingTokenException.class);
        io.micrometer.observation.tck.TestObservationRegistryAssert.assertThat(observations)
                .hasNumberOfObservationsWithNameEqualTo("fenced.write", 2)
                .hasAnObservationWithAKeyValue("outcome", "written")
                .hasAnObservationWithAKeyValue("outcome", "stale");
    }

    // The seed's schema, as it is: one token column, no owner column.

    private String seedTable() {
        String seed = TestDatabase.uniqueName("seed_invoices");
        db.execute("CREATE TABLE " + seed + " (id bigint PRIMARY KEY, status text NOT NULL, total_amount bigint NOT NULL, "
                + "last_fencing_token bigint NOT NULL DEFAULT 0)", "INSERT INTO " + seed + " (id, status, total_amount) VALUES (42, 'OPEN', 0)");
        return seed;
    }

    /** The seed's UPDATE: SET status, total_amount, last_fencing_token WHERE id AND last_fencing_token < token. */
    private static FencedWrite seedUpdate(String seed, long id, long amount) {
        return FencedWrite.into(seed).key("id", id).set("status", "PROCESSED").set("total_amount", amount)
                .fencingColumn("last_fencing_token");
    }

    @Test
    void theSeedsOwnUpdateRunsOnItsTokenColumnAloneAndTellsStaleFromMissing() {
        String seed = seedTable();
        try {
            StepVerifier.create(seedUpdate(seed, 42, 1200).update(db.connections, new TestLease("invoice:42", 5, "a")))
                    .expectNext(1L).verifyComplete();
            assertThat(db.query("SELECT status, total_amount, last_fencing_token FROM " + seed))
                    .containsExactly(List.of("PROCESSED", 1200L, 5L));

            TestLease stale = new TestLease("invoice:42", 4, "b");
            StepVerifier.create(seedUpdate(seed, 42, 1).update(db.connections, stale))
                    .verifyErrorSatisfies(e -> {
                        assertThat(e).isInstanceOf(StaleFencingTokenException.class)
                                .hasMessage("Write to " + seed + " (id = 42) with fencing token 4 of lock 'invoice:42' was "
                                        + "rejected: storage holds token 5");
                        assertThat(((StaleFencingTokenException) e).presentedToken()).isEqualTo(4);
                        assertThat(((StaleFencingTokenException) e).storedToken()).isEqualTo(5);
                    });
            assertThat(stale.reportedNewerToken).hasValue(5);

            StepVerifier.create(seedUpdate(seed, 404, 1).update(db.connections, new TestLease("invoice:404", 9, "a")))
                    .verifyErrorMessage("No row to update in " + seed + " (id = 404) (write under lock 'invoice:404')");
            assertThat(db.query("SELECT status, total_amount, last_fencing_token FROM " + seed))
                    .containsExactly(List.of("PROCESSED", 1200L, 5L));
        } finally {
            db.execute("DROP TABLE IF EXISTS " + seed);
        }
    }

    @Test
    void onTheTokenColumnAloneASecondWriteOfTheSameTokenIsRejectedAndTheLeaseIsNotTold() {
        String seed = seedTable();
        try {
            TestLease lease = new TestLease("invoice:42", 5, "a");
            StepVerifier.create(seedUpdate(seed, 42, 1).update(db.connections, lease)).expectNext(1L).verifyComplete();
            // A retry of the same write, or token 5 re-issued to another owner: a token alone cannot tell them apart.
            StepVerifier.create(seedUpdate(seed, 42, 2).update(db.connections, new TestLease("invoice:42", 5, "b")))
                    .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(StaleFencingTokenException.class)
                            .hasMessageEndingWith("was rejected: storage holds token 5"));
            StepVerifier.create(seedUpdate(seed, 42, 3).update(db.connections, lease))
                    .verifyError(StaleFencingTokenException.class);
            assertThat(lease.isHeld()).isTrue();
            assertThat(db.query("SELECT total_amount FROM " + seed)).containsExactly(List.of(1L));
        } finally {
            db.execute("DROP TABLE IF EXISTS " + seed);
        }
    }

    @Test
    void upsertOnTheTokenColumnAloneInsertsThenGuards() {
        String seed = seedTable();
        try {
            StepVerifier.create(seedUpdate(seed, 7, 10).upsert(db.connections, new TestLease("invoice:7", 3, "a")))
                    .expectNext(1L).verifyComplete();
            StepVerifier.create(seedUpdate(seed, 7, 20).upsert(db.connections, new TestLease("invoice:7", 4, "b")))
                    .expectNext(1L).verifyComplete();
            StepVerifier.create(seedUpdate(seed, 7, 30).upsert(db.connections, new TestLease("invoice:7", 4, "c")))
                    .verifyErrorSatisfies(e -> assertThat(((StaleFencingTokenException) e).storedToken()).isEqualTo(4));
            assertThat(db.query("SELECT total_amount, last_fencing_token FROM " + seed + " WHERE id = 7"))
                    .containsExactly(List.of(20L, 4L));
        } finally {
            db.execute("DROP TABLE IF EXISTS " + seed);
        }
    }

    // The claim step of a read-modify-write.

    private Mono<Long> amountAfterClaim(TestLease lease) {
        return FencedWrite.into(table).key("id", 42).claim(db.connections, lease, row -> row.get("amount", Long.class));
    }

    @Test
    void aClaimBeforeTheReadKeepsAStaleHolderFromLosingTheNewerHoldersUpdate() {
        TestLease a = new TestLease("invoice:42", 1, "a");
        TestLease b = new TestLease("invoice:42", 2, "b");
        // A claims and reads, then stalls; B (a newer lease) claims and reads.
        long seenByA = amountAfterClaim(a).block(BOUND);
        long seenByB = amountAfterClaim(b).block(BOUND);
        assertThat(row(42)).containsExactly("OPEN", 0L, 2L, "b");

        // A wakes before B writes: without the claims its write would be accepted (token 1 above none), and B's
        // write, computed from what B read before it, would then lose A's increment.
        StepVerifier.create(invoice(42, "BY-A", seenByA + 100).update(db.connections, a))
                .verifyErrorSatisfies(e -> assertThat(((StaleFencingTokenException) e).storedToken()).isEqualTo(2));
        StepVerifier.create(invoice(42, "BY-B", seenByB + 100).update(db.connections, b)).expectNext(1L).verifyComplete();
        assertThat(row(42)).containsExactly("BY-B", 100L, 2L, "b");
    }

    @Test
    void aRefusedClaimReadsNothingAndAClaimOfAMissingRowSaysSo() {
        StepVerifier.create(amountAfterClaim(new TestLease("invoice:42", 9, "b"))).expectNext(0L).verifyComplete();
        StepVerifier.create(amountAfterClaim(new TestLease("invoice:42", 8, "a")))
                .verifyErrorSatisfies(e -> assertThat(((StaleFencingTokenException) e).storedToken()).isEqualTo(9));
        StepVerifier.create(FencedWrite.into(table).key("id", 404).claim(db.connections, new TestLease("invoice:404", 1, "a"),
                        row -> row.get("amount", Long.class)))
                .verifyError(FencedRowNotFoundException.class);
    }

    // Inside the user's Spring transaction.

    private TransactionalOperator transactions() {
        return TransactionalOperator.create(new R2dbcTransactionManager(db.connections));
    }

    @Test
    void aFencedWriteInATransactionThatRollsBackLeavesTheRowUntouched() {
        Mono<Long> work = invoice(42, "PAID", 100).update(db.connections, new TestLease("invoice:42", 7, "a"))
                .then(Mono.error(new IllegalStateException("the work failed after the write")));
        StepVerifier.create(work.as(transactions()::transactional)).verifyErrorMessage("the work failed after the write");
        assertThat(row(42)).isEqualTo(java.util.Arrays.asList("OPEN", 0L, null, null));
    }

    @Test
    void aStaleWriteInsideATransactionRollsTheWholeTransactionBack() {
        String audit = TestDatabase.uniqueName("audit");
        db.execute("CREATE TABLE " + audit + " (seq " + db.autoIncrementKey() + ", token bigint NOT NULL)");
        try {
            StepVerifier.create(invoice(42, "PAID", 100).update(db.connections, new TestLease("invoice:42", 9, "b")))
                    .expectNext(1L).verifyComplete();
            DatabaseClient client = DatabaseClient.create(db.connections);
            Mono<Long> work = client.sql("INSERT INTO " + audit + " (token) VALUES (8)").fetch().rowsUpdated()
                    .then(invoice(42, "VOID", 0).update(db.connections, new TestLease("invoice:42", 8, "a")));
            StepVerifier.create(work.as(transactions()::transactional)).verifyError(StaleFencingTokenException.class);
            assertThat(db.query("SELECT count(*) FROM " + audit)).containsExactly(List.of(0L));
            assertThat(row(42)).containsExactly("PAID", 100L, 9L, "b");
        } finally {
            db.execute("DROP TABLE IF EXISTS " + audit);
        }
    }

    @Test
    void aClaimAndWriteInOneTransactionCommitTogether() {
        TestLease lease = new TestLease("invoice:42", 3, "a");
        Mono<Long> readModifyWrite = amountAfterClaim(lease)
                .flatMap(amount -> invoice(42, "PAID", amount + 50).update(db.connections, lease));
        StepVerifier.create(readModifyWrite.as(transactions()::transactional)).expectNext(1L).verifyComplete();
        assertThat(row(42)).containsExactly("PAID", 50L, 3L, "a");
    }

    @Test
    void outsideATransactionEachWriteCommitsOnItsOwn() {
        Mono<Long> work = invoice(42, "PAID", 100).update(db.connections, new TestLease("invoice:42", 7, "a"))
                .then(Mono.error(new IllegalStateException("the work failed after the write")));
        StepVerifier.create(work).verifyErrorMessage("the work failed after the write");
        assertThat(row(42)).containsExactly("PAID", 100L, 7L, "a");
    }

    /** A pooled connection in a READ COMMITTED transaction whose lock waits fail after one second. */
    Connection impatient() {
        return db.readFirstIn(io.r2dbc.spi.IsolationLevel.READ_COMMITTED,
                db.mariaDb ? "SET SESSION innodb_lock_wait_timeout = 1" : "SET LOCAL lock_timeout = '1s'");
    }

    /** Ends an {@link #impatient()} connection's transaction and gives the pool back its default lock wait. */
    void rollBackImpatient(Connection connection) {
        if (db.mariaDb) {
            TestDatabase.run(connection, "SET SESSION innodb_lock_wait_timeout = DEFAULT");
        }
        TestDatabase.rollBackAndClose(connection);
    }

    @Test
    void aRefusedStaleWriterThatKeepsItsTransactionOpenDoesNotMakeTheValidHolderWait() {
        TestLease stale = new TestLease("invoice:42", 100, "old");
        TestLease holder = new TestLease("invoice:42", 200, "new");
        StepVerifier.create(invoice(42, "PAID", 1).update(db.connections, holder)).expectNext(1L).verifyComplete();
        Connection refused = db.readFirstIn(io.r2dbc.spi.IsolationLevel.READ_COMMITTED, "SELECT 1");
        try {
            StepVerifier.create(invoice(42, "STALE", 2).update(refused, stale))
                    .verifyErrorSatisfies(e -> assertThat(((StaleFencingTokenException) e).storedToken()).isEqualTo(200));
            // The stale transaction stays open; the holder's next write must not wait for it (a wait fails here).
            Connection next = impatient();
            try {
                StepVerifier.create(invoice(42, "REFUNDED", 3).update(next, holder)
                                .flatMap(rows -> Mono.from(next.commitTransaction()).thenReturn(rows)))
                        .expectNext(1L).verifyComplete();
            } finally {
                rollBackImpatient(next);
            }
        } finally {
            TestDatabase.rollBackAndClose(refused);
        }
        assertThat(row(42)).containsExactly("REFUNDED", 3L, 200L, "new");
    }

    @Test
    void aLockWaitThatTimesOutIsATypedConflict() {
        Connection other = db.readFirstIn(io.r2dbc.spi.IsolationLevel.READ_COMMITTED,
                "UPDATE " + table + " SET amount = amount + 1 WHERE id = 42");
        try {
            Connection writer = impatient();
            try {
                StepVerifier.create(invoice(42, "PAID", 1).update(writer, new TestLease("invoice:42", 7, "a")))
                        .verifyErrorSatisfies(e -> {
                            assertThat(e).isInstanceOf(FencedWriteConflictException.class).hasMessage("The fenced write to "
                                    + table + " (id = 42) under lock 'invoice:42' conflicted with a concurrent transaction (a "
                                    + "row lock was not granted within the database's lock wait timeout, "
                                    + (db.mariaDb ? "SQLSTATE HY000, error 1205" : "SQLSTATE 55P03") + "); nothing of it was "
                                    + "accepted: roll the transaction back and retry it");
                            assertThat(((FencedWriteConflictException) e).sqlState()).isEqualTo(db.mariaDb ? "HY000" : "55P03");
                        });
            } finally {
                rollBackImpatient(writer);
            }
        } finally {
            TestDatabase.rollBackAndClose(other);
        }
    }

    // A stale holder whose transaction began with a read (fixing its snapshot) while a newer holder wrote: the
    // refusal is explained by what the guarded statement judged, not by the snapshot (MariaDB's default isolation).

    /** On MariaDB a refusal that tells the lease; on PostgreSQL the database itself aborts (it cannot serialize). */
    private void refusedAfterTheSnapshot(Throwable e, TestLease stale, String target) {
        if (db.mariaDb) {
            assertThat(e).isInstanceOf(StaleFencingTokenException.class)
                    .hasMessage("Write to " + target + " with fencing token 100 of lock 'invoice:42' was rejected: storage "
                            + "holds token 200");
            assertThat(stale.reportedNewerToken).as("the lease is told").hasValue(200);
        } else {
            assertThat(e).isInstanceOf(FencedWriteConflictException.class)
                    .hasMessage("The fenced write to " + target + " under lock 'invoice:42' conflicted with a concurrent "
                            + "transaction (the database could not serialize it, SQLSTATE 40001); nothing of it was "
                            + "accepted: roll the transaction back and retry it");
            assertThat(((FencedWriteConflictException) e).sqlState()).isEqualTo("40001");
            assertThat(((FencedWriteConflictException) e).target()).isEqualTo(target);
        }
    }

    @Test
    void aStaleUpdateAfterASnapshotReadIsRefusedNotReportedAsAccepted() {
        String audit = TestDatabase.uniqueName("audit");
        db.execute("CREATE TABLE " + audit + " (seq " + db.autoIncrementKey() + ", token bigint NOT NULL)");
        TestLease stale = new TestLease("invoice:42", 100, "old");
        TestLease newer = new TestLease("invoice:42", 200, "new");
        try {
            StepVerifier.create(invoice(42, "PAID", 100).update(db.connections, stale)).expectNext(1L).verifyComplete();
            Connection transaction = db.readFirstIn(io.r2dbc.spi.IsolationLevel.REPEATABLE_READ,
                    "SELECT amount FROM " + table + " WHERE id = 42");
            try {
                StepVerifier.create(invoice(42, "VOID", 0).update(db.connections, newer)).expectNext(1L).verifyComplete();
                TestDatabase.run(transaction, "INSERT INTO " + audit + " (token) VALUES (100)");
                io.micrometer.observation.tck.TestObservationRegistry observations =
                        io.micrometer.observation.tck.TestObservationRegistry.create();
                StepVerifier.create(invoice(42, "REFUNDED", 50).observe(observations).update(transaction, stale))
                        .verifyErrorSatisfies(e -> refusedAfterTheSnapshot(e, stale, table + " (id = 42)"));
                io.micrometer.observation.tck.TestObservationRegistryAssert.assertThat(observations)
                        .hasAnObservationWithAKeyValue("outcome", db.mariaDb ? "stale" : "conflict");
            } finally {
                TestDatabase.rollBackAndClose(transaction);
            }
            assertThat(db.query("SELECT count(*) FROM " + audit)).containsExactly(List.of(0L));
            assertThat(row(42)).containsExactly("VOID", 0L, 200L, "new");
        } finally {
            db.execute("DROP TABLE IF EXISTS " + audit);
        }
    }

    @Test
    void aStaleUpsertOfARowInsertedAfterTheSnapshotIsRefusedNotMissing() {
        TestLease stale = new TestLease("invoice:42", 100, "old");
        TestLease newer = new TestLease("invoice:42", 200, "new");
        Connection transaction = db.readFirstIn(io.r2dbc.spi.IsolationLevel.REPEATABLE_READ,
                "SELECT count(*) FROM " + table);
        try {
            StepVerifier.create(invoice(43, "OPEN", 7).upsert(db.connections, newer)).expectNext(1L).verifyComplete();
            StepVerifier.create(invoice(43, "OPEN", 1).upsert(transaction, stale))
                    .verifyErrorSatisfies(e -> refusedAfterTheSnapshot(e, stale, table + " (id = 43)"));
        } finally {
            TestDatabase.rollBackAndClose(transaction);
        }
        assertThat(row(43)).containsExactly("OPEN", 7L, 200L, "new");
    }

    // The multi-row update (updateAll): each row against its own lease, refusals per item, the single-row rules.

    private void rows(long... ids) {
        for (long id : ids) {
            db.execute("INSERT INTO " + table + " (id, status, amount) VALUES (" + id + ", 'OPEN', 0)");
        }
    }

    @Test
    void updateAllWritesTheFreshRowsAndReportsTheStaleAndTheMissingOnePerItem() {
        rows(1, 2, 3);
        StepVerifier.create(invoice(2, "NEWER", 9).update(db.connections, new TestLease("invoice:2", 9, "b")))
                .expectNext(1L).verifyComplete();
        TestLease one = new TestLease("invoice:1", 5, "a1");
        TestLease stale = new TestLease("invoice:2", 5, "a2");
        TestLease three = new TestLease("invoice:3", 5, "a3");
        TestLease missing = new TestLease("invoice:4", 5, "a4");
        List<FencedWrite.Item> items = List.of(new FencedWrite.Item(invoice(1, "PAID", 10), one),
                new FencedWrite.Item(invoice(2, "PAID", 20), stale), new FencedWrite.Item(invoice(3, "PAID", 30), three),
                new FencedWrite.Item(invoice(4, "PAID", 40), missing));
        StepVerifier.create(FencedWrite.updateAll(db.connections, items))
                .assertNext(outcomes -> {
                    assertThat(outcomes).extracting(FencedWrite.ItemOutcome::item).containsExactlyElementsOf(items);
                    assertThat(outcomes).extracting(FencedWrite.ItemOutcome::written).containsExactly(true, false, true, false);
                    assertThat(outcomes).extracting(FencedWrite.ItemOutcome::rowsUpdated).containsExactly(1L, 0L, 1L, 0L);
                    StaleFencingTokenException refused = (StaleFencingTokenException) outcomes.get(1).refusal();
                    assertThat(refused).hasMessage("Write to " + table + " (id = 2) with fencing token 5 of lock "
                            + "'invoice:2' was rejected: storage holds token 9");
                    assertThat(refused.storedToken()).isEqualTo(9);
                    assertThat(outcomes.get(3).refusal()).isExactlyInstanceOf(FencedRowNotFoundException.class);
                })
                .verifyComplete();
        assertThat(row(1)).containsExactly("PAID", 10L, 5L, "a1");
        assertThat(row(2)).containsExactly("NEWER", 9L, 9L, "b");
        assertThat(row(3)).containsExactly("PAID", 30L, 5L, "a3");
        assertThat(stale.reportedNewerToken).as("the stale lease is told").hasValue(9);
        assertThat(one.reportedNewerToken).hasValue(-1);
    }

    @Test
    void updateAllKeepsTheRuleOfTheSingleRowWrite() {
        rows(1, 2);
        TestLease lease = new TestLease("invoice:1", 7, "owner-a");
        TestLease reissued = new TestLease("invoice:2", 7, "owner-b");
        StepVerifier.create(invoice(1, "PAID", 10).update(db.connections, lease)).expectNext(1L).verifyComplete();
        StepVerifier.create(invoice(2, "PAID", 20).update(db.connections, new TestLease("invoice:2", 7, "owner-a")))
                .expectNext(1L).verifyComplete();
        // The same lease may write its row again, even the very values; a token re-issued to another owner may not.
        List<FencedWrite.Item> items = List.of(new FencedWrite.Item(invoice(1, "PAID", 10), lease),
                new FencedWrite.Item(invoice(2, "VOID", 0), reissued));
        StepVerifier.create(FencedWrite.updateAll(db.connections, items))
                .assertNext(outcomes -> {
                    assertThat(outcomes.get(0).written()).isTrue();
                    assertThat(outcomes.get(1).refusal()).isInstanceOf(StaleFencingTokenException.class)
                            .hasMessageEndingWith("storage holds token 7 from another owner");
                })
                .verifyComplete();
        assertThat(row(2)).containsExactly("PAID", 20L, 7L, "owner-a");
        // The strict rule refuses the same lease's second write, row by row.
        List<FencedWrite.Item> strict = List.of(
                new FencedWrite.Item(invoice(1, "SHIPPED", 10).rule(FencingRule.STRICTLY_NEWER), lease));
        StepVerifier.create(FencedWrite.updateAll(db.connections, strict))
                .assertNext(outcomes -> assertThat(outcomes.get(0).refusal()).isInstanceOf(StaleFencingTokenException.class)
                        .hasMessageEndingWith("storage holds token 7 from this same lease (the strict rule accepts one "
                                + "write per token)"))
                .verifyComplete();
        assertThat(row(1)).containsExactly("PAID", 10L, 7L, "owner-a");
    }

    @Test
    void updateAllReportsALeaseThatIsNotHeldForItsItemAlone() {
        rows(1);
        TestLease gone = new TestLease("invoice:42", 5, "gone");
        gone.held.set(false);
        List<FencedWrite.Item> items = List.of(new FencedWrite.Item(invoice(42, "VOID", 0), gone),
                new FencedWrite.Item(invoice(1, "PAID", 10), new TestLease("invoice:1", 5, "a")));
        StepVerifier.create(FencedWrite.updateAll(db.connections, items))
                .assertNext(outcomes -> {
                    assertThat(outcomes.get(0).refusal()).isInstanceOf(LeaseNotHeldException.class);
                    assertThat(outcomes.get(1).written()).isTrue();
                })
                .verifyComplete();
        assertThat(row(42)).containsExactly("OPEN", 0L, null, null);
    }

    @Test
    void updateAllRefusesTwoItemsOfOneRowAndItemsOfDifferentShapesBeforeAnySql() {
        TestLease lease = new TestLease("invoice:42", 5, "a");
        StepVerifier.create(FencedWrite.updateAll(db.connections, List.of(new FencedWrite.Item(invoice(42, "A", 1), lease),
                        new FencedWrite.Item(invoice(42, "B", 2), lease))))
                .verifyErrorSatisfies(e -> assertThat(e).isExactlyInstanceOf(IllegalArgumentException.class)
                        .hasMessage("Two items of a multi-row fenced write have the key [id] = [42]: write each row once"));
        StepVerifier.create(FencedWrite.updateAll(db.connections, List.of(new FencedWrite.Item(invoice(42, "A", 1), lease),
                        new FencedWrite.Item(FencedWrite.into(table).key("id", 1L).set("status", "B"), lease))))
                .verifyErrorSatisfies(e -> assertThat(e).isExactlyInstanceOf(IllegalArgumentException.class)
                        .hasMessageStartingWith("The items of a multi-row fenced write must have one shape"));
        assertThat(row(42)).containsExactly("OPEN", 0L, null, null);
    }

    @Test
    void aStaleItemAfterASnapshotReadIsRefusedNotReportedAsWritten() {
        rows(1);
        TestLease stale = new TestLease("invoice:42", 100, "old");
        TestLease fresh = new TestLease("invoice:1", 100, "old");
        StepVerifier.create(invoice(42, "PAID", 100).update(db.connections, stale)).expectNext(1L).verifyComplete();
        Connection transaction = db.readFirstIn(io.r2dbc.spi.IsolationLevel.REPEATABLE_READ,
                "SELECT amount FROM " + table + " WHERE id = 42");
        try {
            StepVerifier.create(invoice(42, "VOID", 0).update(db.connections, new TestLease("invoice:42", 200, "new")))
                    .expectNext(1L).verifyComplete();
            Mono<List<FencedWrite.ItemOutcome>> batch = FencedWrite.updateAll(transaction, List.of(
                    new FencedWrite.Item(invoice(1, "PAID", 1), fresh), new FencedWrite.Item(invoice(42, "REFUNDED", 50), stale)));
            if (db.mariaDb) {
                StepVerifier.create(batch)
                        .assertNext(outcomes -> {
                            assertThat(outcomes.get(0).written()).isTrue();
                            assertThat(outcomes.get(1).refusal()).isInstanceOf(StaleFencingTokenException.class);
                        })
                        .verifyComplete();
                assertThat(stale.reportedNewerToken).hasValue(200);
            } else {
                // PostgreSQL aborts the statement as a whole: it cannot serialize the stale row's update.
                StepVerifier.create(batch).verifyErrorSatisfies(e -> assertThat(e)
                        .isInstanceOf(FencedWriteConflictException.class));
            }
        } finally {
            TestDatabase.rollBackAndClose(transaction);
        }
        assertThat(row(42)).containsExactly("VOID", 0L, 200L, "new");
    }

    /** {@code real}, counting the statements created on it into {@code statements}. */
    private Connection counting(Connection real, java.util.concurrent.atomic.AtomicInteger statements) {
        return (Connection) java.lang.reflect.Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {Connection.class}, (proxy, method, args) -> {
                    if (method.getName().equals("createStatement")) {
                        statements.incrementAndGet();
                    }
                    try {
                        return method.invoke(real, args);
                    } catch (java.lang.reflect.InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }

    @Test
    void updateAllOfFreshRowsIsOneStatementOnPostgresqlAndOnePerRowOnMariaDb() {
        rows(1, 2, 3);
        Connection real = Mono.from(db.connections.create()).block(BOUND);
        java.util.concurrent.atomic.AtomicInteger statements = new java.util.concurrent.atomic.AtomicInteger();
        Connection counting = counting(real, statements);
        try {
            List<FencedWrite.Item> items = LongStream.rangeClosed(1, 3)
                    .mapToObj(id -> new FencedWrite.Item(invoice(id, "PAID", id), new TestLease("invoice:" + id, 5, "a")))
                    .toList();
            StepVerifier.create(FencedWrite.updateAll(counting, items))
                    .assertNext(outcomes -> assertThat(outcomes).allMatch(FencedWrite.ItemOutcome::written))
                    .verifyComplete();
            assertThat(statements).hasValue(db.mariaDb ? 3 : 1);
        } finally {
            Mono.from(real.close()).block(BOUND);
        }
        assertThat(row(3)).containsExactly("PAID", 3L, 5L, "a");
    }

    @Test
    void updateAllOnAFactoryIsOneTransactionSoALaterRowsErrorLeavesTheEarlierRowsUnwritten() {
        rows(1);
        // Row 42's NULL status fails NOT NULL after row 1 was written (on MariaDB in a statement of its own).
        List<FencedWrite.Item> items = List.of(new FencedWrite.Item(invoice(1, "PAID", 10), new TestLease("invoice:1", 5, "a")),
                new FencedWrite.Item(FencedWrite.into(table).key("id", 42L).setNull("status", String.class).set("amount", 2L),
                        new TestLease("invoice:42", 5, "a")));
        StepVerifier.create(FencedWrite.updateAll(db.connections, items))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(io.r2dbc.spi.R2dbcException.class));
        assertThat(row(1)).containsExactly("OPEN", 0L, null, null);
        assertThat(row(42)).containsExactly("OPEN", 0L, null, null);
    }

    @Test
    void updateAllRefusesOneRowUnderNumericKeysOfOneValueBeforeAnySql() {
        String numeric = TestDatabase.uniqueName("numeric_keys");
        db.execute("CREATE TABLE " + numeric + " (id numeric(10, 2) PRIMARY KEY, v bigint, fencing_token bigint, "
                + "fencing_owner text)");
        try {
            db.execute("INSERT INTO " + numeric + " (id, v) VALUES (1, 0)");
            TestLease lease = new TestLease("n:1", 5, "a");
            StepVerifier.create(FencedWrite.updateAll(db.connections, List.of(
                            new FencedWrite.Item(FencedWrite.into(numeric).key("id", new java.math.BigDecimal("1")).set("v", 7L), lease),
                            new FencedWrite.Item(FencedWrite.into(numeric).key("id", new java.math.BigDecimal("1.0")).set("v", 8L),
                                    lease))))
                    .verifyErrorSatisfies(e -> assertThat(e).isExactlyInstanceOf(IllegalArgumentException.class)
                            .hasMessage("Two items of a multi-row fenced write have the key [id] = [1]: write each row once"));
            assertThat(db.query("SELECT v, fencing_token FROM " + numeric)).containsExactly(java.util.Arrays.asList(0L, null));
        } finally {
            db.execute("DROP TABLE " + numeric);
        }
    }

    @Test
    void updateAllRefusesOneColumnOfTwoClassesAndAnUntypedNullColumnBeforeAnySql() {
        rows(1);
        TestLease one = new TestLease("invoice:1", 5, "a");
        TestLease other = new TestLease("invoice:42", 5, "a");
        // A Long and a Double in one column: PostgreSQL's VALUES would store both as double precision.
        StepVerifier.create(FencedWrite.updateAll(db.connections, List.of(
                        new FencedWrite.Item(FencedWrite.into(table).key("id", 1L).set("amount", 9007199254740993L), one),
                        new FencedWrite.Item(FencedWrite.into(table).key("id", 42L).set("amount", 1.0d), other))))
                .verifyErrorSatisfies(e -> assertThat(e).isExactlyInstanceOf(IllegalArgumentException.class)
                        .hasMessage("The items of a multi-row fenced write of " + table + " bind column amount as "
                                + "java.lang.Long and as java.lang.Double: give every item's value of one column one "
                                + "class (PostgreSQL's VALUES would convert them to one type)"));
        StepVerifier.create(FencedWrite.updateAll(db.connections, List.of(
                        new FencedWrite.Item(FencedWrite.into(table).key("id", 1L).setNull("fencing_note", Object.class), one),
                        new FencedWrite.Item(FencedWrite.into(table).key("id", 42L).setNull("fencing_note", Object.class), other))))
                .verifyErrorSatisfies(e -> assertThat(e).isExactlyInstanceOf(IllegalArgumentException.class)
                        .hasMessage("Column fencing_note of a multi-row fenced write of " + table + " is NULL of type "
                                + "Object in every item, which gives PostgreSQL's VALUES no type: name the column's "
                                + "Java type in setNull(column, type)"));
        assertThat(row(1)).containsExactly("OPEN", 0L, null, null);
    }

    @Test
    void updateAllRefusesMoreBoundValuesThanPostgresqlTakesBeforeAnySql() {
        List<FencedWrite.Item> items = new java.util.ArrayList<>();
        for (long id = 0; id < 1000; id++) {
            FencedWrite write = FencedWrite.into(table).key("id", id);
            for (int c = 0; c < 70; c++) {
                write = write.set("c" + c, id);
            }
            items.add(new FencedWrite.Item(write, new TestLease("invoice:" + id, 5, "a")));
        }
        StepVerifier.create(FencedWrite.updateAll(db.connections, items))
                .verifyErrorSatisfies(e -> assertThat(e).isExactlyInstanceOf(IllegalArgumentException.class)
                        .hasMessage("A multi-row fenced write of " + table + " binds 74 values a row, 74000 for 1000 "
                                + "items: at most 65535 values (PostgreSQL's limit), so at most 885 items of this shape"));
    }

    @Test
    void updateAllExplainsItsStaleRowsWithOneReadOnPostgresqlAndOneReadEachOnMariaDb() {
        rows(1, 2, 3);
        for (long id = 1; id <= 3; id++) {
            StepVerifier.create(invoice(id, "NEWER", 9).update(db.connections, new TestLease("invoice:" + id, 9, "b")))
                    .expectNext(1L).verifyComplete();
        }
        Connection real = Mono.from(db.connections.create()).block(BOUND);
        java.util.concurrent.atomic.AtomicInteger statements = new java.util.concurrent.atomic.AtomicInteger();
        try {
            List<TestLease> stale = LongStream.rangeClosed(1, 3).mapToObj(id -> new TestLease("invoice:" + id, 5, "a")).toList();
            List<FencedWrite.Item> items = new java.util.ArrayList<>();
            for (int i = 0; i < 3; i++) {
                items.add(new FencedWrite.Item(invoice(i + 1, "PAID", 1), stale.get(i)));
            }
            items.add(new FencedWrite.Item(invoice(42, "PAID", 42), new TestLease("invoice:42", 5, "a")));
            StepVerifier.create(FencedWrite.updateAll(counting(real, statements), items))
                    .assertNext(outcomes -> {
                        assertThat(outcomes).extracting(FencedWrite.ItemOutcome::written).containsExactly(false, false, false, true);
                        for (int i = 0; i < 3; i++) {
                            assertThat(outcomes.get(i).refusal()).isExactlyInstanceOf(StaleFencingTokenException.class)
                                    .hasMessage("Write to " + table + " (id = " + (i + 1) + ") with fencing token 5 of lock "
                                            + "'invoice:" + (i + 1) + "' was rejected: storage holds token 9");
                        }
                    })
                    .verifyComplete();
            assertThat(stale).allSatisfy(lease -> assertThat(lease.reportedNewerToken).as("each stale lease is told").hasValue(9));
            // PostgreSQL: the statement and one locking read of the three refused rows; MariaDB: per item its update,
            // and per refused item its plain read.
            assertThat(statements).hasValue(db.mariaDb ? 7 : 2);
        } finally {
            Mono.from(real.close()).block(BOUND);
        }
        assertThat(row(1)).containsExactly("NEWER", 9L, 9L, "b");
        assertThat(row(42)).containsExactly("PAID", 42L, 5L, "a");
    }
}
