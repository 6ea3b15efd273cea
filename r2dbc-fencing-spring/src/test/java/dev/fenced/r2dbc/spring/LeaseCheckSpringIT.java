package dev.fenced.r2dbc.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.PostgresLeaseTable;
import dev.fenced.lock.ReleaseOutcome;
import dev.fenced.r2dbc.FencedWrite;
import dev.fenced.r2dbc.LeaseCheckFailedException;
import dev.fenced.r2dbc.TestLease;
import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.ConnectionFactories;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.data.annotation.Id;
import org.springframework.data.r2dbc.core.R2dbcEntityTemplate;
import org.springframework.data.relational.core.mapping.Table;
import org.springframework.r2dbc.connection.R2dbcTransactionManager;
import org.springframework.r2dbc.core.DatabaseClient;
import org.springframework.transaction.reactive.TransactionalOperator;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.test.StepVerifier;

/**
 * The lease check through Spring's entry points, against leases of a lock client on PostgreSQL: an entity template
 * and a {@code DatabaseClient} check on the transaction's connection, a refused check rolls the transaction back,
 * and outside a transaction the check is refused.
 */
@ExtendWith(PostgresServerExtension.class)
class LeaseCheckSpringIT {

    private static final Duration BOUND = Duration.ofSeconds(30);
    /** A table of its own, so that its LISTEN connections are this suite's alone. */
    private static final PostgresLeaseTable LEASES = PostgresLeaseTable.named("fenced_lease_spring_it");
    private static final String NAME = "invoice:42";

    @Table("fenced_checked_invoice")
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

    private final ConnectionPool pool;
    private final DatabaseClient client;
    private final FencedEntityTemplate entities;
    private final TransactionalOperator transactions;
    private final String prefix = "spring-" + UUID.randomUUID() + ":";
    private final FencedLockClient locks;
    private final FencedLockClient rival;

    LeaseCheckSpringIT(PostgresServer server) {
        pool = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(server.r2dbcUrl())).maxSize(8).build());
        R2dbcEntityTemplate template = new R2dbcEntityTemplate(pool);
        client = template.getDatabaseClient();
        entities = FencedEntityTemplate.of(template).checkLease(LEASES);
        transactions = TransactionalOperator.create(new R2dbcTransactionManager(pool));
        locks = lockClient();
        rival = lockClient();
    }

    private FencedLockClient lockClient() {
        return FencedLockClient.builder().postgres(pool, LEASES).keyPrefix(prefix).leaseTime(Duration.ofSeconds(60))
                .commandTimeout(Duration.ofSeconds(20)).build();
    }

    private void sql(String... statements) {
        for (String statement : statements) {
            client.sql(statement).then().block(BOUND);
        }
    }

    @BeforeEach
    void setUp() {
        LEASES.create(pool).block(BOUND);
        sql("DROP TABLE IF EXISTS fenced_checked_invoice",
                "CREATE TABLE fenced_checked_invoice (id bigint PRIMARY KEY, status text NOT NULL, fencing_token bigint, "
                        + "fencing_owner text)",
                "INSERT INTO fenced_checked_invoice (id, status) VALUES (42, 'OPEN')");
    }

    @AfterEach
    void tearDown() {
        rival.close();
        locks.close();
        sql("DROP TABLE IF EXISTS fenced_checked_invoice");
        pool.disposeLater().block(BOUND);
    }

    private List<Object> row() {
        return client.sql("SELECT status, fencing_token, fencing_owner FROM fenced_checked_invoice WHERE id = 42")
                .map(r -> Arrays.<Object>asList(r.get(0, String.class), r.get(1, Long.class), r.get(2, String.class)))
                .one().block(BOUND);
    }

    private boolean anotherSessionWaitsFor(int pid) {
        return Boolean.TRUE.equals(client.sql("SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE " + pid
                + " = ANY(pg_blocking_pids(pid)))").map(r -> r.get(0, Boolean.class)).one().block(BOUND));
    }

    @Test
    void anEntityUpdateChecksTheLeaseInTheTransaction() {
        FencedLease lease = locks.acquire(NAME).block(BOUND);
        StepVerifier.create(entities.update(new Invoice(42L, "PAID"), lease).as(transactions::transactional))
                .assertNext(invoice -> assertThat(invoice.fencingToken).isEqualTo(lease.token()))
                .verifyComplete();
        assertThat(row()).containsExactly("PAID", lease.token(), lease.ownerId());
        assertThat(entities.toString()).endsWith(", checkLease=" + LEASES.name() + "}");
    }

    @Test
    void theClientsCheckHoldsOffTheNextAcquirerUntilTheTransactionCommits() throws Exception {
        FencedLease lease = locks.acquire(NAME).block(BOUND);
        FencedWrite settle = FencedWrite.into("fenced_checked_invoice").key("id", 42).set("status", "PAID").checkLease(LEASES);
        AtomicInteger pid = new AtomicInteger();
        CompletableFuture<Long> written = new CompletableFuture<>();
        Sinks.Empty<Void> commit = Sinks.empty();
        CompletableFuture<Long> work = client.sql("SELECT pg_backend_pid()").map(r -> r.get(0, Integer.class)).one()
                .doOnNext(pid::set)
                .then(FencedDatabaseClient.of(client).update(settle, lease))
                .doOnNext(written::complete)
                .flatMap(rows -> commit.asMono().thenReturn(rows))
                .as(transactions::transactional)
                .toFuture();
        assertThat(written.get(BOUND.toSeconds(), TimeUnit.SECONDS)).isEqualTo(1L);
        StepVerifier.create(lease.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();

        CompletableFuture<FencedLease> next = rival.acquire(NAME).toFuture();
        long deadline = System.nanoTime() + BOUND.toNanos();
        while (!anotherSessionWaitsFor(pid.get())) {
            assertThat(deadline - System.nanoTime()).as("the rival's acquire waits for the transaction's session").isPositive();
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20));
        }
        assertThat(next).isNotDone();

        commit.tryEmitEmpty();
        assertThat(work.get(BOUND.toSeconds(), TimeUnit.SECONDS)).isEqualTo(1L);
        assertThat(next.get(BOUND.toSeconds(), TimeUnit.SECONDS).token()).isGreaterThan(lease.token());
        assertThat(row()).containsExactly("PAID", lease.token(), lease.ownerId());
    }

    @Test
    void aRefusedCheckRollsTheTransactionBack() {
        FencedLease lease = locks.acquire(NAME).block(BOUND);
        TestLease stalled = new TestLease(prefix, NAME, lease.token(), lease.ownerId());
        sql("UPDATE " + LEASES.name() + " SET expires_at = clock_timestamp() - interval '1 second' WHERE lock_id = '"
                + lease.lockId() + "'");
        Mono<Invoice> work = client.sql("UPDATE fenced_checked_invoice SET status = 'TOUCHED' WHERE id = 42").then()
                .then(entities.update(new Invoice(42L, "PAID"), stalled));
        StepVerifier.create(work.as(transactions::transactional))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(LeaseCheckFailedException.class)
                        .hasMessage("The lease on lock '" + NAME + "' (lock id " + lease.lockId() + ") with fencing token "
                                + lease.token() + " is not held in lease table " + LEASES.name()
                                + ": its row expired by the database's clock; nothing was written"));
        assertThat(row()).containsExactly("OPEN", null, null);
    }

    @Test
    void outsideATransactionTheCheckIsRefusedBeforeAnySql() {
        FencedLease lease = locks.acquire(NAME).block(BOUND);
        StepVerifier.create(entities.update(new Invoice(42L, "PAID"), lease))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(IllegalStateException.class)
                        .hasMessageStartingWith("A fenced write of fenced_checked_invoice checks its lease (checkLease) and "
                                + "needs a transaction"));
        assertThat(row()).containsExactly("OPEN", null, null);
    }
}
