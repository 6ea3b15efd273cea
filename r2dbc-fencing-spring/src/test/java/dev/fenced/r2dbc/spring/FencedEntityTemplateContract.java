package dev.fenced.r2dbc.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.r2dbc.FencedRowNotFoundException;
import dev.fenced.lock.StaleFencingTokenException;
import dev.fenced.r2dbc.TestLease;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.ConnectionFactories;
import java.time.Duration;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.data.annotation.Id;
import org.springframework.data.r2dbc.core.R2dbcEntityTemplate;
import org.springframework.data.relational.core.mapping.Table;
import org.springframework.data.relational.core.query.Criteria;
import org.springframework.data.relational.core.query.Query;
import org.springframework.r2dbc.connection.R2dbcTransactionManager;
import org.springframework.transaction.reactive.TransactionalOperator;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

/**
 * Fenced updates and saves of Spring Data R2DBC entities, run against every supported database
 * ({@link FencedEntityTemplateIT} on PostgreSQL, {@link FencedEntityTemplateMariaDbIT} on MariaDB).
 */
abstract class FencedEntityTemplateContract {

    private static final Duration BOUND = Duration.ofSeconds(30);

    /** The seed's table: the token column alone, mapped on an immutable entity. */
    @Table("fenced_entity_seed")
    record SeedInvoice(@Id Long id, String status, long totalAmount, @FencingToken @Nullable Long lastFencingToken) {
    }

    /** A mutable entity with token and owner columns. */
    @Table("fenced_entity_invoice")
    static final class Invoice {
        @Id Long id;
        String status;
        @FencingToken @Nullable Long fencingToken;
        @FencingOwner @Nullable String fencingOwner;

        Invoice(Long id, String status) {
            this.id = id;
            this.status = status;
        }
    }

    /** An entity whose token is not mapped. */
    @Table("fenced_entity_seed")
    record Unfenced(@Id Long id, String status) {
    }

    private final ConnectionPool pool;
    private final R2dbcEntityTemplate template;
    private final FencedEntityTemplate entities;

    FencedEntityTemplateContract(String r2dbcUrl) {
        pool = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(r2dbcUrl)).maxSize(4).build());
        template = new R2dbcEntityTemplate(pool);
        entities = FencedEntityTemplate.of(template);
    }

    private void sql(String... statements) {
        for (String statement : statements) {
            template.getDatabaseClient().sql(statement).then().block(BOUND);
        }
    }

    @BeforeEach
    void setUp() {
        sql("DROP TABLE IF EXISTS fenced_entity_seed", "DROP TABLE IF EXISTS fenced_entity_invoice",
                "CREATE TABLE fenced_entity_seed (id bigint PRIMARY KEY, status text NOT NULL, total_amount bigint NOT NULL, "
                        + "last_fencing_token bigint NOT NULL DEFAULT 0)",
                "CREATE TABLE fenced_entity_invoice (id bigint PRIMARY KEY, status text NOT NULL, fencing_token bigint, "
                        + "fencing_owner text)",
                "INSERT INTO fenced_entity_seed (id, status, total_amount) VALUES (42, 'OPEN', 0)");
    }

    @AfterEach
    void tearDown() {
        sql("DROP TABLE IF EXISTS fenced_entity_seed", "DROP TABLE IF EXISTS fenced_entity_invoice");
        pool.disposeLater().block(BOUND);
    }

    private SeedInvoice seedRow() {
        return Objects.requireNonNull(template.selectOne(Query.query(Criteria.where("id").is(42L)), SeedInvoice.class).block(BOUND));
    }

    @Test
    void updateWritesTheEntityWithTheGuardAndReturnsItWithTheLeasesToken() {
        StepVerifier.create(entities.update(new SeedInvoice(42L, "PROCESSED", 1200, null), new TestLease("invoice:42", 5, "a")))
                .expectNext(new SeedInvoice(42L, "PROCESSED", 1200, 5L))
                .verifyComplete();
        assertThat(seedRow()).isEqualTo(new SeedInvoice(42L, "PROCESSED", 1200, 5L));
    }

    @Test
    void aStaleUpdateIsRejectedWithBothTokensAndLeavesTheRowAlone() {
        entities.update(new SeedInvoice(42L, "PROCESSED", 1200, null), new TestLease("invoice:42", 5, "a")).block(BOUND);
        TestLease stale = new TestLease("invoice:42", 4, "b");
        StepVerifier.create(entities.update(new SeedInvoice(42L, "VOID", 0, 4L), stale))
                .verifyErrorSatisfies(e -> {
                    assertThat(e).isInstanceOf(StaleFencingTokenException.class)
                            .hasMessage("Write to fenced_entity_seed (id = 42) with fencing token 4 of lock 'invoice:42' was "
                                    + "rejected: storage holds token 5");
                    assertThat(((StaleFencingTokenException) e).presentedToken()).isEqualTo(4);
                    assertThat(((StaleFencingTokenException) e).storedToken()).isEqualTo(5);
                });
        assertThat(stale.reportedNewerToken).hasValue(5);
        assertThat(seedRow()).isEqualTo(new SeedInvoice(42L, "PROCESSED", 1200, 5L));
    }

    @Test
    void anUpdateOfAMissingRowIsNotStale() {
        StepVerifier.create(entities.update(new SeedInvoice(404L, "PROCESSED", 1, null), new TestLease("invoice:404", 5, "a")))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(FencedRowNotFoundException.class)
                        .hasMessage("No row to update in fenced_entity_seed (id = 404) (write under lock 'invoice:404')"));
    }

    @Test
    void saveInsertsAMissingRowThenTheSameLeaseMaySaveAgainAndAnOlderOneMayNot() {
        TestLease lease = new TestLease("invoice:7", 3, "a");
        Invoice invoice = new Invoice(7L, "OPEN");
        StepVerifier.create(entities.save(invoice, lease))
                .assertNext(saved -> {
                    assertThat(saved).isSameAs(invoice);
                    assertThat(saved.fencingToken).isEqualTo(3L);
                    assertThat(saved.fencingOwner).isEqualTo("a");
                })
                .verifyComplete();
        invoice.status = "PAID";
        StepVerifier.create(entities.save(invoice, lease)).expectNextCount(1).verifyComplete();
        StepVerifier.create(entities.save(new Invoice(7L, "VOID"), new TestLease("invoice:7", 2, "b")))
                .verifyError(StaleFencingTokenException.class);
        Invoice stored = template.selectOne(Query.query(Criteria.where("id").is(7L)), Invoice.class).block(BOUND);
        assertThat(stored).isNotNull();
        assertThat(stored.status).isEqualTo("PAID");
        assertThat(stored.fencingToken).isEqualTo(3L);
        assertThat(stored.fencingOwner).isEqualTo("a");
    }

    @Test
    void anUpdateInATransactionThatRollsBackLeavesTheRowUntouched() {
        TransactionalOperator transactions = TransactionalOperator.create(new R2dbcTransactionManager(pool));
        Mono<SeedInvoice> work = entities.update(new SeedInvoice(42L, "PROCESSED", 1200, null), new TestLease("invoice:42", 5, "a"))
                .then(Mono.error(new IllegalStateException("the work failed after the update")));
        StepVerifier.create(work.as(transactions::transactional)).verifyErrorMessage("the work failed after the update");
        assertThat(seedRow()).isEqualTo(new SeedInvoice(42L, "OPEN", 0, 0L));
    }

    @Test
    void anEntityWithoutAFencingTokenIsRefused() {
        StepVerifier.create(entities.update(new Unfenced(42L, "X"), new TestLease("invoice:42", 5, "a")))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(IllegalArgumentException.class)
                        .hasMessage("A fenced write of entity " + Unfenced.class.getName() + " needs an @Id property and a "
                                + "@FencingToken property"));
        assertThat(seedRow().status()).isEqualTo("OPEN");
    }
}
