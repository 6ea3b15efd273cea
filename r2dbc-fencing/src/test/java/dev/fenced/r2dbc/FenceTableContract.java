package dev.fenced.r2dbc;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.LeaseNotHeldException;
import dev.fenced.lock.StaleFencingTokenException;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Result;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.r2dbc.connection.R2dbcTransactionManager;
import org.springframework.r2dbc.connection.TransactionAwareConnectionFactoryProxy;
import org.springframework.r2dbc.core.DatabaseClient;
import org.springframework.transaction.reactive.TransactionalOperator;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

/**
 * The contract of the fence table, with plain R2DBC and with Spring's transactions, run against every supported
 * database ({@link FenceTableIT} on PostgreSQL, {@link FenceTableMariaDbIT} on MariaDB).
 */
abstract class FenceTableContract {

    final TestDatabase db;
    FenceTable fence;
    private String ledger;

    FenceTableContract(TestDatabase db) {
        this.db = db;
    }

    @BeforeEach
    void setUp() {
        fence = FenceTable.named(TestDatabase.uniqueName("fence"));
        ledger = TestDatabase.uniqueName("ledger");
        StepVerifier.create(fence.create(db.connections)).verifyComplete();
        db.execute("CREATE TABLE " + ledger + " (id bigint PRIMARY KEY, total bigint NOT NULL)",
                "INSERT INTO " + ledger + " VALUES (1, 0)", "INSERT INTO " + ledger + " VALUES (2, 0)");
    }

    @AfterEach
    void tearDown() {
        db.execute("DROP TABLE IF EXISTS " + ledger, "DROP TABLE IF EXISTS " + fence.name());
        db.close();
    }

    private Flux<Long> addToBoth(Connection c, String table, long amount) {
        String marker = db.mariaDb ? "?" : "$1";
        return Flux.concat(
                        c.createStatement("UPDATE " + table + " SET total = total + " + marker + " WHERE id = 1").bind(0, amount).execute(),
                        c.createStatement("UPDATE " + table + " SET total = total + " + marker + " WHERE id = 2").bind(0, amount).execute())
                .flatMap(Result::getRowsUpdated);
    }

    private List<List<Object>> totals() {
        return db.query("SELECT total FROM " + ledger + " ORDER BY id");
    }

    @Test
    void createIsIdempotentAndShipsTheDdl() {
        StepVerifier.create(fence.create(db.connections)).verifyComplete();
        assertThat(FenceTable.defaultTable().ddl()).startsWith("-- The fence table").contains("CREATE TABLE IF NOT EXISTS \"fenced_fence\" (");
        assertThat(fence.ddl()).contains("CREATE TABLE IF NOT EXISTS \"" + fence.name() + "\" (");
    }

    @Test
    void freshTokenCommitsEverythingInTheTransaction() {
        StepVerifier.create(fence.inTransaction(db.connections, new TestLease("ledger", 5, "a"), c -> addToBoth(c, ledger, 10)))
                .expectNext(1L, 1L)
                .verifyComplete();
        assertThat(totals()).containsExactly(List.of(10L), List.of(10L));
        assertThat(db.query("SELECT last_token, last_owner FROM " + fence.name() + " WHERE resource = 'fenced:{ledger}'"))
                .containsExactly(List.of(5L, "a"));
    }

    @Test
    void staleTokenCommitsNothing() {
        fence.inTransaction(db.connections, new TestLease("ledger", 6, "b"), c -> addToBoth(c, ledger, 1)).blockLast(Duration.ofSeconds(30));
        TestLease stale = new TestLease("ledger", 5, "a");
        StepVerifier.create(fence.inTransaction(db.connections, stale, c -> addToBoth(c, ledger, 1000)))
                .verifyErrorSatisfies(e -> {
                    assertThat(e).isInstanceOf(StaleFencingTokenException.class)
                            .hasMessage("Write to fence " + fence.name() + " (resource = fenced:{ledger}) with fencing token 5 of lock "
                                    + "'ledger' was rejected: storage holds token 6");
                });
        assertThat(totals()).containsExactly(List.of(1L), List.of(1L));
        assertThat(stale.reportedNewerToken).hasValue(6);
    }

    @Test
    void failingWorkRollsBackTheFenceToo() {
        StepVerifier.create(fence.inTransaction(db.connections, new TestLease("ledger", 5, "a"),
                        c -> addToBoth(c, ledger, 10).then(Mono.error(new IllegalStateException("work failed")))))
                .verifyErrorMessage("work failed");
        assertThat(totals()).containsExactly(List.of(0L), List.of(0L));
        assertThat(db.query("SELECT count(*) FROM " + fence.name())).containsExactly(List.of(0L));
    }

    @Test
    void leaseThatIsNotHeldIsRefusedBeforeTheTransactionWrites() {
        TestLease released = new TestLease("ledger", 5, "a");
        released.release().block();
        StepVerifier.create(fence.inTransaction(db.connections, released, c -> addToBoth(c, ledger, 10)))
                .verifyError(LeaseNotHeldException.class);
        assertThat(totals()).containsExactly(List.of(0L), List.of(0L));
    }

    @Test
    void advanceOnAnAutoCommitConnectionIsRefused() {
        StepVerifier.create(Mono.usingWhen(db.connections.create(),
                        c -> fence.advance(c, new TestLease("ledger", 5, "a")), Connection::close))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(IllegalStateException.class)
                        .hasMessageStartingWith("FenceTable.advance needs a transaction"));
        assertThat(db.query("SELECT count(*) FROM " + fence.name())).containsExactly(List.of(0L));
    }

    @Test
    void springTransactionalOperatorAndDatabaseClientCompose() {
        DatabaseClient client = DatabaseClient.create(db.connections);
        TransactionalOperator transactions = TransactionalOperator.create(new R2dbcTransactionManager(db.connections));
        TestLease newer = new TestLease("ledger", 8, "b");
        TestLease stale = new TestLease("ledger", 7, "a");

        // inConnection hands out the connection of the surrounding Spring transaction.
        Mono<Long> fenced = client.inConnection(c -> fence.advance(c, newer))
                .then(client.sql("UPDATE " + ledger + " SET total = total + 5 WHERE id = 1").fetch().rowsUpdated());
        StepVerifier.create(fenced.as(transactions::transactional)).expectNext(1L).verifyComplete();

        Mono<Long> rejected = client.inConnection(c -> fence.advance(c, stale))
                .then(client.sql("UPDATE " + ledger + " SET total = total + 500 WHERE id = 1").fetch().rowsUpdated());
        StepVerifier.create(rejected.as(transactions::transactional)).verifyError(StaleFencingTokenException.class);

        assertThat(totals()).containsExactly(List.of(5L), List.of(0L));
    }

    private TransactionalOperator transactions() {
        return TransactionalOperator.create(new R2dbcTransactionManager(db.connections));
    }

    @Test
    void inTransactionJoinsTheSpringTransactionSoItsRollbackUndoesTheFenceAndTheWork() {
        Flux<Long> work = fence.inTransaction(db.connections, new TestLease("ledger", 5, "a"), c -> addToBoth(c, ledger, 10))
                .concatWith(Mono.error(new IllegalStateException("the caller failed after the fenced work")));
        StepVerifier.create(work.as(transactions()::transactional))
                .expectNext(1L, 1L)
                .verifyErrorMessage("the caller failed after the fenced work");
        assertThat(totals()).containsExactly(List.of(0L), List.of(0L));
        assertThat(db.query("SELECT count(*) FROM " + fence.name())).containsExactly(List.of(0L));
    }

    @Test
    void aStaleAdvanceInsideASpringTransactionRollsItAllBack() {
        fence.inTransaction(db.connections, new TestLease("ledger", 6, "b"), c -> addToBoth(c, ledger, 1)).blockLast(Duration.ofSeconds(30));
        DatabaseClient client = DatabaseClient.create(db.connections);
        Mono<Void> work = client.sql("UPDATE " + ledger + " SET total = total + 100 WHERE id = 2").fetch().rowsUpdated()
                .thenMany(fence.inTransaction(db.connections, new TestLease("ledger", 5, "a"), c -> addToBoth(c, ledger, 100)))
                .then();
        StepVerifier.create(work.as(transactions()::transactional)).verifyError(StaleFencingTokenException.class);
        assertThat(totals()).containsExactly(List.of(1L), List.of(1L));
    }

    @Test
    void theStrictRuleLetsOneTransactionThroughPerToken() {
        FenceTable strict = fence.rule(FencingRule.STRICTLY_NEWER);
        TestLease lease = new TestLease("ledger", 5, "a");
        StepVerifier.create(strict.inTransaction(db.connections, lease, c -> addToBoth(c, ledger, 1))).expectNext(1L, 1L).verifyComplete();
        StepVerifier.create(strict.inTransaction(db.connections, lease, c -> addToBoth(c, ledger, 1)))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(StaleFencingTokenException.class)
                        .hasMessageEndingWith("storage holds token 5 from this same lease (the strict rule accepts one write per token)"));
        assertThat(lease.isHeld()).isTrue();
        StepVerifier.create(strict.inTransaction(db.connections, new TestLease("ledger", 6, "b"), c -> addToBoth(c, ledger, 1)))
                .expectNext(1L, 1L).verifyComplete();
        assertThat(totals()).containsExactly(List.of(2L), List.of(2L));
    }

    @Test
    void aResourceFencedByOneLockRefusesTheLeaseOfAnother() {
        TestLease invoice = new TestLease("invoice:42", 3, "a");
        Flux<Void> byInvoice = fence.inTransaction(db.connections, invoice, c -> fence.advance(c, invoice, "ledger"));
        StepVerifier.create(byInvoice).verifyComplete();
        StepVerifier.create(fence.inTransaction(db.connections, new TestLease("customer:7", 9, "b"),
                        c -> fence.advance(c, new TestLease("customer:7", 9, "b"), "ledger")))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(FenceLockMismatchException.class)
                        .hasMessage("Resource 'ledger' of fence " + fence.name() + " holds the tokens of lock fenced:{invoice:42}; "
                                + "the lease on lock fenced:{customer:7} cannot advance it (tokens of different locks cannot be compared)"));
    }

    @Test
    void aStaleAdvanceAfterASnapshotReadIsRefusedWithTheNewerToken() {
        TestLease stale = new TestLease("ledger", 100, "old");
        TestLease newer = new TestLease("ledger", 200, "new");
        Connection transaction = db.readFirstIn(io.r2dbc.spi.IsolationLevel.REPEATABLE_READ, "SELECT total FROM " + ledger);
        try {
            StepVerifier.create(fence.inTransaction(db.connections, newer, c -> addToBoth(c, ledger, 5)))
                    .expectNext(1L, 1L).verifyComplete();
            StepVerifier.create(fence.advance(transaction, stale)).verifyErrorSatisfies(e -> {
                String target = "fence " + fence.name() + " (resource = fenced:{ledger})";
                if (db.mariaDb) {
                    assertThat(e).isInstanceOf(StaleFencingTokenException.class).hasMessage("Write to " + target
                            + " with fencing token 100 of lock 'ledger' was rejected: storage holds token 200");
                    assertThat(stale.reportedNewerToken).hasValue(200);
                } else {
                    assertThat(e).isInstanceOf(FencedWriteConflictException.class).hasMessage("The fenced write to " + target
                            + " under lock 'ledger' conflicted with a concurrent transaction (the database could not "
                            + "serialize it, SQLSTATE 40001); nothing of it was accepted: roll the transaction back and retry it");
                }
            });
        } finally {
            TestDatabase.rollBackAndClose(transaction);
        }
        assertThat(totals()).containsExactly(List.of(5L), List.of(5L));
    }

    // Given a factory that hands out the transaction's own connection, the fence joins it: it neither begins nor
    // commits, so the caller's rollback undoes everything.

    @Test
    void inTransactionThroughATransactionAwareProxyJoinsTheCallersTransaction() {
        ConnectionFactory proxy = new TransactionAwareConnectionFactoryProxy(db.connections);
        Flux<Long> work = fence.inTransaction(proxy, new TestLease("ledger", 5, "a"), c -> addToBoth(c, ledger, 10))
                .thenMany(Flux.error(new IllegalStateException("the caller fails after the fenced work")));
        StepVerifier.create(work.as(transactions()::transactional)).verifyErrorMessage("the caller fails after the fenced work");
        assertThat(totals()).containsExactly(List.of(0L), List.of(0L));
        assertThat(db.query("SELECT count(*) FROM " + fence.name())).containsExactly(List.of(0L));
    }

    @Test
    void inTransactionOnAConnectionAlreadyInATransactionNeitherBeginsNorCommits() {
        Connection transaction = db.readFirstIn(io.r2dbc.spi.IsolationLevel.READ_COMMITTED, "SELECT total FROM " + ledger);
        try {
            StepVerifier.create(fence.inTransaction(HandedOutConnection.factory(transaction, db.connections),
                            new TestLease("ledger", 5, "a"), c -> addToBoth(c, ledger, 10)))
                    .expectNext(1L, 1L).verifyComplete();
        } finally {
            TestDatabase.rollBackAndClose(transaction);
        }
        assertThat(totals()).containsExactly(List.of(0L), List.of(0L));
        assertThat(db.query("SELECT count(*) FROM " + fence.name())).containsExactly(List.of(0L));
    }
}
