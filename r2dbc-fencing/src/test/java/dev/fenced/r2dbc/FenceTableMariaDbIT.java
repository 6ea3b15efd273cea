package dev.fenced.r2dbc;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.StaleFencingTokenException;
import dev.fenced.testservices.MariaDbServer;
import dev.fenced.testservices.MariaDbServerExtension;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryMetadata;
import io.r2dbc.spi.IsolationLevel;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

/**
 * The fence-table contract on MariaDB, and connections with auto-commit off: r2dbc-mariadb opens no transaction
 * for them until a statement runs, so the fenced work must begin and commit one of its own.
 */
@ExtendWith(MariaDbServerExtension.class)
class FenceTableMariaDbIT extends FenceTableContract {

    private final String url;

    FenceTableMariaDbIT(MariaDbServer server) {
        super(TestDatabase.mariaDb(server));
        this.url = server.r2dbcUrl();
    }

    /** A plain factory whose connections turn auto-commit off, as a user's configuration may. */
    private ConnectionFactory autoCommitOff() {
        ConnectionFactory driver = ConnectionFactories.get(url);
        return new ConnectionFactory() {
            @Override
            public Publisher<? extends Connection> create() {
                return Mono.from(driver.create()).flatMap(c -> Mono.from(c.setAutoCommit(false)).thenReturn(c));
            }

            @Override
            public ConnectionFactoryMetadata getMetadata() {
                return driver.getMetadata();
            }
        };
    }

    private static Mono<Long> insertAudit(Connection c, String table, long id) {
        return Mono.from(c.createStatement("INSERT INTO " + table + " VALUES (" + id + ", 0)").execute())
                .flatMap(r -> Mono.from(r.getRowsUpdated()));
    }

    private void inTransactionCommits(ConnectionFactory factory) {
        String audit = TestDatabase.uniqueName("audit");
        String fenceName = TestDatabase.uniqueName("fence");
        FenceTable fence = FenceTable.named(fenceName);
        StepVerifier.create(fence.create(db.connections)).verifyComplete();
        db.execute("CREATE TABLE " + audit + " (id bigint PRIMARY KEY, total bigint NOT NULL)");
        try {
            StepVerifier.create(fence.inTransaction(factory, new TestLease("audit", 5, "a"), c -> insertAudit(c, audit, 1)))
                    .expectNext(1L).verifyComplete();
            assertThat(db.query("SELECT id FROM " + audit)).containsExactly(List.of(1L));
            assertThat(db.query("SELECT last_token FROM " + fenceName)).containsExactly(List.of(5L));
        } finally {
            db.execute("DROP TABLE IF EXISTS " + audit, "DROP TABLE IF EXISTS " + fenceName);
        }
    }

    @Test
    void inTransactionOnAFactoryWithAutoCommitOffCommitsATransactionOfItsOwn() {
        inTransactionCommits(autoCommitOff());
    }

    @Test
    void inTransactionOnAPoolWithAutoCommitOffCommitsAndReturnsTheConnectionWithNoTransactionOpen() {
        ConnectionPool pool = new ConnectionPool(ConnectionPoolConfiguration.builder(autoCommitOff()).maxSize(1).build());
        try {
            inTransactionCommits(pool);
            Boolean open = Mono.usingWhen(pool.create(), c -> Mono.just(Connections.inOpenTransaction(c)), Connection::close)
                    .block(Duration.ofSeconds(30));
            assertThat(open).isFalse();
        } finally {
            pool.disposeLater().block(Duration.ofSeconds(10));
        }
    }

    @Test
    void inTransactionOnAnAutoCommitOffUrlCommitsATransactionOfItsOwn() {
        inTransactionCommits(ConnectionFactories.get(url + (url.contains("?") ? "&" : "?") + "autocommit=false"));
    }

    @Test
    void aFencedUpdateOutsideATransactionOnAnAutoCommitOffConnectionCommits() {
        String table = TestDatabase.uniqueName("rows");
        db.execute("CREATE TABLE " + table + " (id bigint PRIMARY KEY, status varchar(16) NOT NULL, fencing_token bigint, "
                + "fencing_owner varchar(64))", "INSERT INTO " + table + " VALUES (1, 'OLD', 5, 'a')");
        try {
            StepVerifier.create(FencedWrite.into(table).key("id", 1L).set("status", "NEW")
                            .update(autoCommitOff(), new TestLease("rows", 5, "a")))
                    .expectNext(1L).verifyComplete();
            assertThat(db.query("SELECT status FROM " + table)).containsExactly(List.of("NEW"));
        } finally {
            db.execute("DROP TABLE IF EXISTS " + table);
        }
    }

    // MariaDB only: on PostgreSQL the advance is one INSERT … ON CONFLICT DO UPDATE … WHERE, which locks the
    // conflicting row even when its WHERE refuses the lease, before any explanation runs.

    @Test
    void aRefusedStaleAdvanceThatKeepsItsTransactionOpenDoesNotMakeTheValidHolderWait() {
        String fenceName = TestDatabase.uniqueName("fence");
        FenceTable fence = FenceTable.named(fenceName);
        StepVerifier.create(fence.create(db.connections)).verifyComplete();
        TestLease holder = new TestLease("ledger", 9, "b");
        try {
            StepVerifier.create(fence.inTransaction(db.connections, holder, c -> Mono.<Long>empty())).verifyComplete();
            Connection refused = db.readFirstIn(IsolationLevel.READ_COMMITTED, "SELECT 1");
            try {
                StepVerifier.create(fence.advance(refused, new TestLease("ledger", 8, "a")))
                        .verifyErrorSatisfies(e -> assertThat(((StaleFencingTokenException) e).storedToken()).isEqualTo(9));
                // The stale transaction stays open; the holder's next advance must not wait for it (a wait fails here).
                Connection next = db.readFirstIn(IsolationLevel.READ_COMMITTED, "SET SESSION innodb_lock_wait_timeout = 1");
                try {
                    StepVerifier.create(fence.advance(next, holder).then(Mono.from(next.commitTransaction()))).verifyComplete();
                } finally {
                    TestDatabase.run(next, "SET SESSION innodb_lock_wait_timeout = DEFAULT");
                    TestDatabase.rollBackAndClose(next);
                }
            } finally {
                TestDatabase.rollBackAndClose(refused);
            }
            assertThat(db.query("SELECT last_token, last_owner FROM " + fenceName)).containsExactly(List.of(9L, "b"));
        } finally {
            db.execute("DROP TABLE IF EXISTS " + fenceName);
        }
    }
}
