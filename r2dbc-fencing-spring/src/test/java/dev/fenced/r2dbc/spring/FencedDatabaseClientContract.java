package dev.fenced.r2dbc.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.StaleFencingTokenException;
import dev.fenced.r2dbc.FenceTable;
import dev.fenced.r2dbc.FencedWrite;
import dev.fenced.r2dbc.TestLease;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.ConnectionFactories;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.r2dbc.connection.R2dbcTransactionManager;
import org.springframework.r2dbc.core.DatabaseClient;
import org.springframework.transaction.reactive.TransactionalOperator;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

/**
 * Fenced writes through a {@code DatabaseClient}, inside and outside Spring transactions, run against every
 * supported database ({@link FencedDatabaseClientIT}, {@link FencedDatabaseClientMariaDbIT}).
 */
abstract class FencedDatabaseClientContract {

    private static final Duration BOUND = Duration.ofSeconds(30);

    private final ConnectionPool pool;
    private final DatabaseClient client;
    private final FencedDatabaseClient fenced;
    private final TransactionalOperator transactions;
    private final String table = "fenced_client_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
    private final FenceTable fence = FenceTable.named(table + "_fence");

    FencedDatabaseClientContract(String r2dbcUrl) {
        pool = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(r2dbcUrl)).maxSize(4).build());
        client = DatabaseClient.create(pool);
        fenced = FencedDatabaseClient.of(client);
        transactions = TransactionalOperator.create(new R2dbcTransactionManager(pool));
    }

    private void sql(String statement) {
        client.sql(statement).then().block(BOUND);
    }

    private List<Object> row() {
        return client.sql("SELECT status, fencing_token FROM " + table + " WHERE id = 42")
                .map(r -> java.util.Arrays.<Object>asList(r.get(0, String.class), r.get(1, Long.class))).one().block(BOUND);
    }

    private FencedWrite settle(String status) {
        return FencedWrite.into(table).key("id", 42).set("status", status);
    }

    @BeforeEach
    void setUp() {
        sql("CREATE TABLE " + table + " (id bigint PRIMARY KEY, status text NOT NULL, fencing_token bigint, fencing_owner text)");
        sql("INSERT INTO " + table + " (id, status) VALUES (42, 'OPEN')");
        fence.create(pool).block(BOUND);
    }

    @AfterEach
    void tearDown() {
        sql("DROP TABLE IF EXISTS " + table);
        sql("DROP TABLE IF EXISTS " + fence.name());
        pool.disposeLater().block(BOUND);
    }

    @Test
    void aStaleWriteThroughTheClientRollsBackTheClientsOtherStatements() {
        StepVerifier.create(fenced.update(settle("PAID"), new TestLease("invoice:42", 9, "b"))).expectNext(1L).verifyComplete();
        Mono<Long> work = client.sql("UPDATE " + table + " SET status = 'TOUCHED' WHERE id = 42").fetch().rowsUpdated()
                .then(fenced.update(settle("VOID"), new TestLease("invoice:42", 8, "a")));
        StepVerifier.create(work.as(transactions::transactional)).verifyError(StaleFencingTokenException.class);
        assertThat(row()).containsExactly("PAID", 9L);
    }

    @Test
    void aClaimAndAnUpsertThroughTheClientCommitWithTheTransaction() {
        TestLease lease = new TestLease("invoice:42", 3, "a");
        Mono<Long> work = fenced.claim(settle("CLAIMED"), lease, r -> r.get("status", String.class))
                .flatMap(status -> fenced.upsert(settle(status + "-THEN-PAID"), lease));
        StepVerifier.create(work.as(transactions::transactional)).expectNext(1L).verifyComplete();
        assertThat(row()).containsExactly("CLAIMED-THEN-PAID", 3L);
    }

    @Test
    void aFenceAdvanceJoinsTheTransactionAndIsRefusedOutsideOne() {
        TestLease lease = new TestLease("ledger", 5, "a");
        Mono<Long> work = fenced.advance(fence, lease)
                .then(client.sql("UPDATE " + table + " SET status = 'FENCED' WHERE id = 42").fetch().rowsUpdated());
        StepVerifier.create(work.as(transactions::transactional)).expectNext(1L).verifyComplete();
        assertThat(client.sql("SELECT last_token FROM " + fence.name()).map(r -> r.get(0, Long.class)).all().collectList().block(BOUND))
                .containsExactly(5L);

        StepVerifier.create(fenced.advance(fence, new TestLease("ledger", 6, "b")))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(IllegalStateException.class)
                        .hasMessageStartingWith("FenceTable.advance needs a transaction"));
    }
}
