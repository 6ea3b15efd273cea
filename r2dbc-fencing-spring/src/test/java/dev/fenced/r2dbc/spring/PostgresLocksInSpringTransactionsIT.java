package dev.fenced.r2dbc.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.PostgresLeaseTable;
import dev.fenced.lock.ReleaseOutcome;
import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.springframework.r2dbc.connection.R2dbcTransactionManager;
import org.springframework.r2dbc.connection.TransactionAwareConnectionFactoryProxy;
import org.springframework.r2dbc.core.DatabaseClient;
import org.springframework.transaction.reactive.TransactionalOperator;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Locks on PostgreSQL taken and given back inside a caller's Spring transaction ({@code shared/ENVIRONMENTS.md}, how
 * the connection arrives): the lock client given the pool, or a {@code TransactionAwareConnectionFactoryProxy} over
 * it, the way Spring users hand a factory to code that is not Spring-aware; acquires and releases sharing statements
 * (the default) or not ({@code -Ddev.fenced.postgres.batching=false}). Every grant and release is the store's own
 * transaction: it is visible to other sessions while the caller's transaction is still open, survives that
 * transaction's rollback, and the store never commits or joins the caller's transaction. (The client subscribes to
 * its store calls apart from the caller's subscription, and shared statements apart from any one request, so the
 * caller's Reactor context, which carries the transaction, does not reach the store's connections; the test asserts
 * the outcome, whichever path a change would break.)
 */
@ExtendWith(PostgresServerExtension.class)
class PostgresLocksInSpringTransactionsIT {

    private static final Duration BOUND = Duration.ofSeconds(30);
    /** A table of its own, so that its LISTEN connections are this suite's alone. */
    private static final PostgresLeaseTable LEASES = PostgresLeaseTable.named("fenced_lease_spring_tx_it");
    private static final String AUDIT = "fenced_spring_tx_audit";
    private static final String BATCHING = "dev.fenced.postgres.batching";
    /** Acquires in flight at once inside the transaction: enough to share statements. */
    private static final int LOCKS = 12;

    private ConnectionPool pool;
    private DatabaseClient database;

    static Stream<Arguments> cells() {
        return Stream.of(Arguments.of("pool", true), Arguments.of("pool", false),
                Arguments.of("transaction-aware proxy", true), Arguments.of("transaction-aware proxy", false));
    }

    @BeforeEach
    void connect(PostgresServer server) {
        pool = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(server.r2dbcUrl()))
                .maxSize(16).build());
        database = DatabaseClient.create(pool);
        LEASES.create(pool).block(BOUND);
        database.sql("CREATE TABLE IF NOT EXISTS " + AUDIT + " (prefix text NOT NULL)").then().block(BOUND);
    }

    @AfterEach
    void close() {
        System.clearProperty(BATCHING);
        pool.disposeLater().block(BOUND);
    }

    @ParameterizedTest(name = "lock client on the {0}, shared statements {1}")
    @MethodSource("cells")
    void grantsAndReleasesInsideACallersTransactionAreTheirOwn(String arrival, boolean shared) throws Exception {
        if (!shared) {
            System.setProperty(BATCHING, "false");
        }
        ConnectionFactory lockFactory = arrival.equals("pool") ? pool : new TransactionAwareConnectionFactoryProxy(pool);
        String prefix = "sptx-" + UUID.randomUUID() + ":";
        List<String> names = new ArrayList<>();
        for (int i = 0; i < LOCKS; i++) {
            names.add("n-" + i);
        }
        TransactionalOperator transactions = TransactionalOperator.create(new R2dbcTransactionManager(pool));
        try (FencedLockClient locks = FencedLockClient.builder().postgres(lockFactory, LEASES).keyPrefix(prefix)
                .leaseTime(Duration.ofSeconds(60)).commandTimeout(Duration.ofSeconds(10)).build()) {
            CompletableFuture<List<FencedLease>> acquired = new CompletableFuture<>();
            CompletableFuture<Boolean> proxyJoined = new CompletableFuture<>();
            CompletableFuture<Void> proceed = new CompletableFuture<>();
            // The caller's transaction: its own insert, the acquires, then (once the test has looked from outside) a
            // failure that rolls it back.
            CompletableFuture<Void> caller = transactions.transactional(
                    database.sql("INSERT INTO " + AUDIT + " (prefix) VALUES ('" + prefix + "')").then()
                            .then(seesTheCallersInsert(prefix)).doOnNext(proxyJoined::complete)
                            .thenMany(Flux.fromIterable(names).flatMap(locks::acquire, LOCKS))
                            .collectList()
                            .doOnNext(acquired::complete)
                            .then(Mono.fromFuture(proceed))
                            .then(Mono.<Void>error(new IllegalStateException("the caller's transaction fails"))))
                    .toFuture();
            List<FencedLease> leases = acquired.get(BOUND.toSeconds(), TimeUnit.SECONDS);
            assertThat(proxyJoined.get()).as("control: a proxy over the pool hands the caller's chain its transaction")
                    .isTrue();

            assertThat(ownersSeenOutside(prefix)).as("grants seen by another session, the caller's transaction open")
                    .containsExactlyInAnyOrderElementsOf(leases.stream().map(FencedLease::ownerId).toList());
            assertThat(auditRows(prefix)).as("the caller's insert, its transaction open").isZero();

            proceed.complete(null);
            try {
                caller.get(BOUND.toSeconds(), TimeUnit.SECONDS);
                throw new AssertionError("the caller's transaction succeeded");
            } catch (ExecutionException e) {
                assertThat(e.getCause()).hasMessage("the caller's transaction fails");
            }
            assertThat(auditRows(prefix)).as("the caller's insert, rolled back: nothing committed it").isZero();
            assertThat(ownersSeenOutside(prefix)).as("grants after the caller's rollback")
                    .containsExactlyInAnyOrderElementsOf(leases.stream().map(FencedLease::ownerId).toList());
            assertThat(leases).allMatch(FencedLease::isHeld);

            // Releases inside a transaction that rolls back: released all the same.
            List<ReleaseOutcome> outcomes = new ArrayList<>();
            transactions.transactional(Flux.fromIterable(leases).flatMap(FencedLease::release, LOCKS)
                            .doOnNext(outcomes::add)
                            .then(Mono.<Void>error(new IllegalStateException("the releasing transaction fails"))))
                    .onErrorResume(IllegalStateException.class, e -> Mono.empty())
                    .block(BOUND);
            assertThat(outcomes).hasSize(LOCKS).containsOnly(ReleaseOutcome.RELEASED);
            assertThat(ownersSeenOutside(prefix)).as("owners after releases in a rolled-back transaction").isEmpty();
        } finally {
            database.sql("DELETE FROM " + LEASES.name() + " WHERE lock_id LIKE '" + prefix + "%'").then().block(BOUND);
            database.sql("DELETE FROM " + AUDIT + " WHERE prefix = '" + prefix + "'").then().block(BOUND);
        }
    }

    /**
     * Whether a statement the caller runs through a transaction-aware proxy over the pool sees its own uncommitted
     * insert: true inside its transaction (the proxy hands out the transaction's connection), which shows that the
     * transaction is there to be joined by a lock client given such a proxy.
     */
    private Mono<Boolean> seesTheCallersInsert(String prefix) {
        ConnectionFactory proxy = new TransactionAwareConnectionFactoryProxy(pool);
        return Mono.usingWhen(Mono.from(proxy.create()),
                c -> Flux.from(c.createStatement("SELECT count(*) FROM " + AUDIT + " WHERE prefix = $1")
                                .bind(0, prefix).execute())
                        .concatMap(r -> r.map((row, meta) -> row.get(0, Long.class)))
                        .next()
                        .map(n -> n == 1),
                Connection::close);
    }

    /** The owners of the prefix's held locks, read on a connection of the pool outside any transaction. */
    private List<String> ownersSeenOutside(String prefix) {
        return Flux.usingWhen(pool.create(), c -> Flux.from(c.createStatement("SELECT owner FROM " + LEASES.name()
                                + " WHERE lock_id LIKE $1 AND owner IS NOT NULL AND expires_at > clock_timestamp()")
                        .bind(0, prefix + "%").execute())
                        .concatMap(r -> r.map((row, meta) -> row.get(0, String.class))),
                Connection::close).collectList().block(BOUND);
    }

    /** The caller's committed audit rows of the prefix. */
    private long auditRows(String prefix) {
        return Flux.usingWhen(pool.create(), c -> Flux.from(c.createStatement("SELECT count(*) FROM " + AUDIT
                                + " WHERE prefix = $1").bind(0, prefix).execute())
                        .concatMap(r -> r.map((row, meta) -> row.get(0, Long.class))),
                Connection::close).blockLast(BOUND);
    }
}
