package dev.fenced.lock.internal.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.LockServiceException;
import dev.fenced.lock.PostgresLeaseTable;
import dev.fenced.lock.TokenScheme;
import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.lock.internal.LeaseStore;
import dev.fenced.lock.internal.LeaseStore.AcquireReply;
import dev.fenced.lock.internal.LeaseStore.RenewRequest;
import dev.fenced.lock.internal.LeaseStoreContract;
import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.test.StepVerifier;

/** The store contract on PostgreSQL with the default server-time tokens, and what the database adds. */
@ExtendWith(PostgresServerExtension.class)
class PostgresLeaseStoreIT extends LeaseStoreContract {

    /** A table of its own, so that its channel and rows are this suite's alone. */
    static final String TABLE = "fenced_lease_it";

    private ConnectionPool pool;
    private ClientSettings settings;
    private PostgresLeaseStore store;

    /** The scheme the store under test mints tokens with. */
    TokenScheme scheme() {
        return TokenScheme.SERVER_TIME;
    }

    @BeforeEach
    void connect(PostgresServer postgres) {
        pool = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(postgres.r2dbcUrl()))
                .maxSize(8).build());
        PostgresLeaseTable.named(TABLE).create(pool).block(Duration.ofSeconds(30));
        settings = ClientSettings.of("it-" + UUID.randomUUID() + ":", Duration.ofSeconds(30), null, Duration.ofSeconds(30), null, null)
                .withTokenScheme(scheme());
        store = PostgresLeaseStore.open(pool, TABLE, settings);
    }

    @AfterEach
    void close() {
        store.close().block(Duration.ofSeconds(10));
        settings.scheduler().dispose();
        pool.disposeLater().block(Duration.ofSeconds(10));
    }

    @Override
    protected LeaseStore store() {
        return store;
    }

    @Override
    protected boolean consecutiveTokens() {
        return scheme() == TokenScheme.COUNTER;
    }

    @Override
    protected void elapse(Duration duration) {
        sleep(duration);
    }

    private <T> List<T> sql(String sql, Class<T> type, Object... args) {
        return Flux.usingWhen(pool.create(), c -> {
            var statement = c.createStatement(sql);
            for (int i = 0; i < args.length; i++) {
                statement.bind(i, args[i]);
            }
            return Flux.from(statement.execute()).concatMap(r -> r.map((row, meta) -> row.get(0, type)));
        }, Connection::close).collectList().block(Duration.ofSeconds(10));
    }

    private AcquireReply grant(String name, String owner, long leaseMillis) {
        AcquireReply reply = store.acquire(name, owner, leaseMillis, 0).block(Duration.ofSeconds(5));
        assertThat(reply).isNotNull();
        assertThat(reply.acquired()).isTrue();
        return reply;
    }

    private String lockId(String name) {
        return settings.keyPrefix() + "{" + name + "}";
    }

    @Test
    void aTokenIsAtLeastTheDatabaseTimeInMicroseconds() {
        String name = "time-" + UUID.randomUUID();
        if (consecutiveTokens()) {
            assertThat(grant(name, "a", 10_000).token()).isEqualTo(1);
            return;
        }
        String micros = "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint";
        long before = sql(micros, Long.class).get(0);
        long token = grant(name, "a", 10_000).token();
        assertThat(token).isBetween(before, sql(micros, Long.class).get(0));
    }

    @Test
    void theDatabaseClockDecidesExpiry() {
        String name = "clock-" + UUID.randomUUID();
        AcquireReply a = grant(name, "a", 60_000);
        // The database's clock passed the lease's expiry, whatever the client's clock says.
        sql("UPDATE " + TABLE + " SET expires_at = clock_timestamp() - interval '1 second' WHERE lock_id = $1 RETURNING token",
                Long.class, lockId(name));
        assertThat(store.renew(List.of(new RenewRequest(name, "a", a.token(), 60_000))).block(Duration.ofSeconds(5)))
                .containsExactly(false);
        AcquireReply b = grant(name, "b", 60_000);
        assertThat(b.token()).isGreaterThan(a.token());
        assertThat(store.release(name, "a", a.token()).block(Duration.ofSeconds(5))).isFalse();
    }

    @Test
    void theRowKeepsTheLastTokenAfterRelease() {
        String name = "row-" + UUID.randomUUID();
        AcquireReply a = grant(name, "a", 10_000);
        assertThat(store.release(name, "a", a.token()).block(Duration.ofSeconds(5))).isTrue();
        assertThat(sql("SELECT token FROM " + TABLE + " WHERE lock_id = $1 AND owner IS NULL", Long.class, lockId(name)))
                .containsExactly(a.token());
    }

    @Test
    void racingAcquiresOfANewLockGrantItOnce() {
        String name = "race-" + UUID.randomUUID();
        List<AcquireReply> replies = Flux.range(0, 8)
                .flatMap(i -> store.acquire(name, "owner-" + i, 10_000, 0))
                .collectList().block(Duration.ofSeconds(10));
        assertThat(replies).filteredOn(AcquireReply::acquired).hasSize(1);
    }

    @Test
    void releaseNotificationsResumeAfterTheListeningConnectionIsLost() {
        String name = "relisten-" + UUID.randomUUID();
        AcquireReply a = grant(name, "a", 10_000);
        long[] seen = new long[1];
        // The steps block: run them off the event loop that delivers the counts.
        StepVerifier.create(store.releases(name).publishOn(Schedulers.boundedElastic()))
                .consumeNextWith(count -> seen[0] = count)
                .then(() -> sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1",
                        Boolean.class, "LISTEN \"" + TABLE + "\""))
                // Once listening again, releases missed meanwhile count as one.
                .consumeNextWith(count -> {
                    assertThat(count).isGreaterThan(seen[0]);
                    seen[0] = count;
                })
                .then(() -> store.release(name, "a", a.token()).block(Duration.ofSeconds(5)))
                .expectNextMatches(count -> count > seen[0])
                .thenCancel()
                .verify(Duration.ofSeconds(20));
    }

    @Test
    void anAcquireThatTimesOutIsCancelledInTheDatabaseAndGrantsNothingLater() throws Exception {
        String name = "stuck-" + UUID.randomUUID();
        AcquireReply first = grant(name, "a", 60_000);
        assertThat(store.release(name, "a", first.token()).block(Duration.ofSeconds(5))).isTrue();
        ClientSettings quick = ClientSettings.of(settings.keyPrefix(), Duration.ofSeconds(30), null, Duration.ofSeconds(30),
                Duration.ofMillis(300), null);
        PostgresLeaseStore impatient = PostgresLeaseStore.open(pool, TABLE, quick);
        Connection blocker = Mono.from(pool.create()).block(Duration.ofSeconds(5));
        try {
            // Another session holds the free row's lock, as an open transaction does (a lease check, a DBA's UPDATE).
            Mono.from(blocker.beginTransaction()).block(Duration.ofSeconds(5));
            Flux.from(blocker.createStatement("SELECT token FROM " + TABLE + " WHERE lock_id = $1 FOR UPDATE")
                    .bind(0, lockId(name)).execute()).flatMap(r -> r.map((row, meta) -> row.get(0))).blockLast(Duration.ofSeconds(5));

            StepVerifier.create(impatient.acquire(name, "ghost", 60_000, 0))
                    .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(LockServiceException.class));

            Mono.from(blocker.commitTransaction()).block(Duration.ofSeconds(5));
            // Let a statement still running in the database finish before looking at the row.
            String running = "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid()"
                    + " AND query LIKE '%INSERT INTO " + TABLE + " %'";
            for (int i = 0; i < 100 && sql(running, Long.class).get(0) > 0; i++) {
                sleep(Duration.ofMillis(50));
            }
            assertThat(sql("SELECT count(*) FROM " + TABLE + " WHERE lock_id = $1 AND owner = 'ghost'", Long.class, lockId(name)))
                    .as("the acquire that timed out must not grant the lock once the row is free")
                    .containsExactly(0L);
        } finally {
            Mono.from(blocker.close()).block(Duration.ofSeconds(5));
            impatient.close().block(Duration.ofSeconds(5));
            quick.scheduler().dispose();
        }
    }

    @Test
    void aMissingTableIsNamedInTheError() {
        PostgresLeaseStore missing = PostgresLeaseStore.open(pool, "no_such_lease_table", settings);
        StepVerifier.create(missing.acquire("x", "a", 10_000, 0))
                .verifyErrorSatisfies(e -> assertThat(e)
                        .isInstanceOf(LockServiceException.class)
                        .hasMessageContaining("the lease table \"no_such_lease_table\" does not exist (create it with "
                                + "PostgresLeaseTable.create)"));
        missing.close().block(Duration.ofSeconds(5));
    }

    @Test
    void aCommandWithoutAConnectionWasNeverSent() {
        PostgresLeaseStore unreachable = PostgresLeaseStore.open(
                ConnectionFactories.get("r2dbc:postgresql://postgres@127.0.0.1:1/test"), TABLE, settings);
        StepVerifier.create(unreachable.acquire("x", "a", 10_000, 0))
                .verifyErrorSatisfies(e -> {
                    assertThat(e).isInstanceOf(LockServiceException.class).hasMessageContaining("cannot connect to PostgreSQL");
                    assertThat(unreachable.neverSent(e)).isTrue();
                });
        unreachable.close().block(Duration.ofSeconds(5));
    }

    /**
     * A table created by an earlier version, without the holder column: a store with a label acquires, renews and
     * lists without labels, after one WARN line; {@code create} adds the column, idempotently, and then labels work.
     */
    @Test
    void aTableOfAnEarlierVersionWorksWithoutLabelsUntilCreateAddsTheColumn() {
        String old = "fenced_lease_v0_" + UUID.randomUUID().toString().replace("-", "").substring(0, 8);
        sql("CREATE TABLE " + old + " (lock_id text PRIMARY KEY, owner text, token bigint NOT NULL,"
                + " expires_at timestamptz NOT NULL)", Long.class);
        ch.qos.logback.classic.Logger log = (ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory.getLogger(PostgresLeaseStore.class);
        ch.qos.logback.core.read.ListAppender<ch.qos.logback.classic.spi.ILoggingEvent> events = new ch.qos.logback.core.read.ListAppender<>();
        events.start();
        log.addAppender(events);
        PostgresLeaseStore labelled = PostgresLeaseStore.open(pool, old, settings, "web-1 (pid 1)");
        try {
            AcquireReply a = labelled.acquire("old-a", "a", 10_000, 0).block(Duration.ofSeconds(5));
            AcquireReply b = labelled.acquire("old-b", "b", 10_000, 0).block(Duration.ofSeconds(5));
            assertThat(a.acquired()).isTrue();
            assertThat(b.acquired()).isTrue();
            assertThat(labelled.renew(List.of(new RenewRequest("old-a", "a", a.token(), 10_000))).block(Duration.ofSeconds(5)))
                    .containsExactly(true);
            StepVerifier.create(labelled.locks(dev.fenced.lock.internal.NamePattern.of("old-*")))
                    .expectNextMatches(l -> l.holderLabel() == null)
                    .expectNextMatches(l -> l.holderLabel() == null)
                    .verifyComplete();
            assertThat(events.list).filteredOn(e -> e.getLevel() == ch.qos.logback.classic.Level.WARN).hasSize(1)
                    .allSatisfy(e -> assertThat(e.getFormattedMessage()).contains("has no holder column"));

            PostgresLeaseTable.named(old).create(pool).block(Duration.ofSeconds(30));
            PostgresLeaseTable.named(old).create(pool).block(Duration.ofSeconds(30));
            PostgresLeaseStore upgraded = PostgresLeaseStore.open(pool, old, settings, "web-2 (pid 2)");
            try {
                assertThat(upgraded.acquire("old-c", "c", 10_000, 0).block(Duration.ofSeconds(5)).acquired()).isTrue();
                StepVerifier.create(upgraded.lock("old-c").map(LeaseStore.LockState::holderLabel))
                        .expectNext("web-2 (pid 2)").verifyComplete();
            } finally {
                upgraded.close().block(Duration.ofSeconds(10));
            }
        } finally {
            log.detachAppender(events);
            labelled.close().block(Duration.ofSeconds(10));
            sql("DROP TABLE " + old, Long.class);
        }
    }

    /**
     * A store that started on a table without the holder column grants without a label after another instance's
     * {@code create} added the column: the view shows no label for its grant, not the previous holder's.
     */
    @Test
    void aGrantThatWroteNoLabelShowsNoneNotThePreviousHolders() {
        String old = "fenced_lease_v0_" + UUID.randomUUID().toString().replace("-", "").substring(0, 8);
        sql("CREATE TABLE " + old + " (lock_id text PRIMARY KEY, owner text, token bigint NOT NULL,"
                + " expires_at timestamptz NOT NULL)", Long.class);
        PostgresLeaseStore a = PostgresLeaseStore.open(pool, old, settings, "instance-A");
        PostgresLeaseStore b = null;
        try {
            AcquireReply first = a.acquire("x", "owner-a1", 10_000, 0).block(Duration.ofSeconds(5));
            assertThat(first.acquired()).isTrue(); // found no column: A acquires without labels from now on
            assertThat(a.release("x", "owner-a1", first.token()).block(Duration.ofSeconds(5))).isTrue();
            PostgresLeaseTable.named(old).create(pool).block(Duration.ofSeconds(30));
            b = PostgresLeaseStore.open(pool, old, settings, "instance-B");
            AcquireReply byB = b.acquire("x", "owner-b", 10_000, 0).block(Duration.ofSeconds(5));
            assertThat(byB.acquired()).isTrue();
            StepVerifier.create(a.lock("x").map(LeaseStore.LockState::holderLabel)).expectNext("instance-B").verifyComplete();
            assertThat(b.release("x", "owner-b", byB.token()).block(Duration.ofSeconds(5))).isTrue();

            AcquireReply byA = a.acquire("x", "owner-a2", 10_000, 0).block(Duration.ofSeconds(5));
            assertThat(byA.acquired()).isTrue();
            StepVerifier.create(b.lock("x"))
                    .assertNext(seen -> {
                        assertThat(seen.token()).isEqualTo(byA.token());
                        assertThat(seen.holderLabel()).as("the label of instance A's grant, which wrote none").isNull();
                    })
                    .verifyComplete();
        } finally {
            a.close().block(Duration.ofSeconds(10));
            if (b != null) {
                b.close().block(Duration.ofSeconds(10));
            }
            sql("DROP TABLE " + old, Long.class);
        }
    }

    /**
     * A user that may use, but does not own, a table of an earlier version may not add the holder column:
     * {@code create} completes (one WARN line) as the previous version's did, and its clients work without labels.
     */
    @Test
    void createOnATableOfAnEarlierVersionCompletesForAUserThatDoesNotOwnIt(PostgresServer postgres) {
        String suffix = UUID.randomUUID().toString().replace("-", "").substring(0, 8);
        String old = "fenced_lease_v0_" + suffix;
        String role = "fenced_app_" + suffix;
        sql("CREATE TABLE " + old + " (lock_id text PRIMARY KEY, owner text, token bigint NOT NULL,"
                + " expires_at timestamptz NOT NULL)", Long.class);
        sql("CREATE ROLE " + role + " LOGIN", Long.class);
        sql("GRANT USAGE, CREATE ON SCHEMA public TO " + role, Long.class);
        sql("GRANT SELECT, INSERT, UPDATE ON " + old + " TO " + role, Long.class);
        ConnectionPool app = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(
                postgres.r2dbcUrl().replaceFirst("//[^@/]*@", "//" + role + "@"))).maxSize(1).build());
        try {
            StepVerifier.create(PostgresLeaseTable.named(old).create(app)).verifyComplete();
            PostgresLeaseStore store = PostgresLeaseStore.open(app, old, settings, "web-1");
            try {
                StepVerifier.create(store.acquire("x", "o", 10_000, 0).map(AcquireReply::acquired)).expectNext(true)
                        .verifyComplete();
            } finally {
                store.close().block(Duration.ofSeconds(10));
            }
        } finally {
            app.disposeLater().block(Duration.ofSeconds(10));
            sql("DROP TABLE " + old, Long.class);
            sql("DROP OWNED BY " + role, Long.class);
            sql("DROP ROLE " + role, Long.class);
        }
    }
}
