package dev.fenced.r2dbc.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.PostgresLeaseTable;
import dev.fenced.lock.StaleFencingTokenException;
import dev.fenced.r2dbc.FenceTable;
import dev.fenced.r2dbc.FencedWrite;
import dev.fenced.r2dbc.FencedWriteConflictException;
import dev.fenced.r2dbc.HandedOutConnection;
import dev.fenced.r2dbc.LeaseCheckFailedException;
import dev.fenced.r2dbc.TestLease;
import dev.fenced.r2dbc.spring.Environments.Database;
import dev.fenced.r2dbc.spring.Environments.Level;
import dev.fenced.testservices.MariaDbServer;
import dev.fenced.testservices.MariaDbServerExtension;
import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Result;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiFunction;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.springframework.data.annotation.Id;
import org.springframework.data.r2dbc.core.R2dbcEntityTemplate;
import org.springframework.data.relational.core.mapping.Table;
import org.springframework.r2dbc.core.DatabaseClient;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

/**
 * The environment matrix of fenced writes ({@code shared/ENVIRONMENTS.md}): every write path × every isolation level
 * of both databases, set as the pool's (session's) default and as the transaction's own level × every way the
 * connection arrives. Each cell replays the sequence that broke MariaDB's {@code REPEATABLE READ}: the stale holder
 * (token 100) wrote the row and committed; its next transaction begins with a read (fixing the snapshot); a newer
 * holder (token 200) takes over, writes the row, advances the fence and its grant, and commits; the stale
 * transaction inserts an audit row and runs the write path. Checked on other connections: the write is refused, the
 * whole transaction rolled back (the audit row too), the lease told; then the newer holder's write in a transaction
 * of the same environment that fails after it is undone with the rest (nothing commits half-way), and its write in a
 * new transaction commits. {@code -Denvm.only=<part of a cell name>} runs only the matching cells.
 *
 * <p>What a refusal is, by cell:
 * <ul>
 *   <li>{@link StaleFencingTokenException}, the lease told ({@code SUPERSEDED}, floor raised): PostgreSQL
 *       {@code READ COMMITTED}, MariaDB {@code READ COMMITTED} and {@code REPEATABLE READ};</li>
 *   <li>{@link FencedWriteConflictException} with SQLSTATE {@code 40001}, the lease not told (the database aborts the
 *       statement before anything is read): PostgreSQL {@code REPEATABLE READ} and {@code SERIALIZABLE}, which
 *       cannot write or lock a row changed after the snapshot;</li>
 *   <li>the lease check ({@code checkLease}) refuses before the write: {@link LeaseCheckFailedException}
 *       ({@code OTHER_GRANT}) at {@code READ COMMITTED}, {@link FencedWriteConflictException} at the higher levels.</li>
 * </ul>
 *
 * <p>How the connection arrives: {@code pool} (a {@code TransactionalOperator} on the {@code ConnectionPool}, the
 * library given the pool); {@code proxy} (the same transaction, the library given a
 * {@code TransactionAwareConnectionFactoryProxy} over the pool, as code that is not Spring-aware gets it; the caller's
 * own statements go through a {@code DatabaseClient} on the pool, which is transaction-aware by itself); {@code plain factory} (a
 * {@code TransactionalOperator} on a plain, unpooled factory, the library given that factory); {@code @Transactional}
 * (a reactive {@code @Transactional} method of a Spring bean, transaction manager on the pool, the library given the
 * pool); {@code own R2DBC transaction} (the caller begins a transaction on a pooled connection with plain R2DBC and
 * hands the library a plain factory that hands out that connection, which is not in auto-commit mode);
 * {@code transaction manager on a proxy} (the other direction: the {@code TransactionalOperator} and the caller's
 * statements on a {@code TransactionAwareConnectionFactoryProxy} over the pool, the library given the pool; the pool's
 * default level only, and the paths of {@code ON_PROXY_PATHS}). The
 * {@code DatabaseClient} and entity-template paths use a client (template) over the factory the library is given.
 *
 * <p>Pruned, with the reason: {@code checkLease} on MariaDB (it refuses MariaDB by design, before any statement of
 * the write; {@code LeaseCheckMariaDbIT}); a write outside any transaction (auto-commit: nothing fixes a snapshot and
 * nothing can be committed half-way; the contract suites cover it); MariaDB {@code SERIALIZABLE} (not in the
 * environments every store must survive; InnoDB makes its plain reads locking reads, so the snapshot defect cannot
 * arise there). Every other combination runs.
 *
 * <p>Fast: one server per database; one pool (and context) per database, level and way of arrival, reused by all
 * its cells; three small tables per database, one row per cell.
 */
@ExtendWith({PostgresServerExtension.class, MariaDbServerExtension.class})
class EnvironmentMatrixIT {

    private static final Duration BOUND = Duration.ofSeconds(30);
    private static final String ROWS = "envm_rows";
    private static final String AUDIT = "envm_audit";
    private static final FenceTable FENCE = FenceTable.named("envm_fence");
    private static final PostgresLeaseTable LEASES = PostgresLeaseTable.named("envm_leases");
    private static final long STALE = 100;
    private static final long NEWER = 200;
    /** Cell ids: rows of other runs on the same server stay out of the way. */
    private static final AtomicLong IDS = new AtomicLong(ThreadLocalRandom.current().nextLong(1, 1L << 40) * 1000);

    private static Database postgres;
    private static Database mariaDb;
    private static Environments environments;
    private static long firstId;

    /** The row of a cell, mapped for the entity-template path. */
    @Table(ROWS)
    record EnvRow(@Id Long id, String status, long amount, @FencingToken @Nullable Long fencingToken,
            @FencingOwner @Nullable String fencingOwner) {
    }

    enum Setting {
        POSTGRES_READ_COMMITTED(false, Level.READ_COMMITTED),
        POSTGRES_REPEATABLE_READ(false, Level.REPEATABLE_READ),
        POSTGRES_SERIALIZABLE(false, Level.SERIALIZABLE),
        MARIADB_READ_COMMITTED(true, Level.READ_COMMITTED),
        MARIADB_REPEATABLE_READ(true, Level.REPEATABLE_READ);

        final boolean mariaDb;
        final Level level;

        Setting(boolean mariaDb, Level level) {
            this.mariaDb = mariaDb;
            this.level = level;
        }

        /** Whether the database aborts a write of a row changed after the transaction's snapshot. */
        boolean abortsOnChangedSnapshot() {
            return !mariaDb && level != Level.READ_COMMITTED;
        }

        @Override
        public String toString() {
            return (mariaDb ? "MariaDB " : "PostgreSQL ") + level.sql;
        }
    }

    enum Scope {
        POOL_DEFAULT("pool default"),
        TRANSACTION("transaction's own level");

        final String label;

        Scope(String label) {
            this.label = label;
        }
    }

    enum Arrival {
        POOL("pool"),
        PROXY("proxy"),
        PLAIN("plain factory"),
        TRANSACTIONAL("@Transactional"),
        OWN_TRANSACTION("own R2DBC transaction"),
        MANAGER_ON_PROXY("transaction manager on a proxy, library given the pool");

        final String label;

        Arrival(String label) {
            this.label = label;
        }
    }

    enum Path {
        UPDATE("update"),
        UPSERT("upsert"),
        CLAIM("claim"),
        ADVANCE("advance"),
        IN_TRANSACTION("inTransaction"),
        CHECK_LEASE("checkLease"),
        DATABASE_CLIENT("FencedDatabaseClient"),
        ENTITY_TEMPLATE("FencedEntityTemplate");

        final String label;

        Path(String label) {
            this.label = label;
        }
    }

    record Cell(Setting setting, Scope scope, Arrival arrival, Path path) {

        @Override
        public String toString() {
            return setting + " (" + scope.label + "), " + arrival.label + ", " + path.label;
        }
    }

    /**
     * The paths run with the transaction manager on a proxy: one of each way of joining (a write on a factory, the
     * fence's own transaction, the lease check's); the others reach the transaction the same way.
     */
    private static final Set<Path> ON_PROXY_PATHS = EnumSet.of(Path.UPDATE, Path.IN_TRANSACTION, Path.CHECK_LEASE);

    static Stream<Cell> cells() {
        List<Cell> cells = new ArrayList<>();
        for (Setting setting : Setting.values()) {
            for (Scope scope : Scope.values()) {
                for (Arrival arrival : Arrival.values()) {
                    for (Path path : Path.values()) {
                        if (path == Path.CHECK_LEASE && setting.mariaDb) {
                            continue;
                        }
                        if (arrival == Arrival.MANAGER_ON_PROXY && (scope != Scope.POOL_DEFAULT || !ON_PROXY_PATHS.contains(path))) {
                            continue;
                        }
                        cells.add(new Cell(setting, scope, arrival, path));
                    }
                }
            }
        }
        String only = System.getProperty("envm.only");
        return cells.stream().filter(c -> only == null || c.toString().contains(only));
    }

    @BeforeAll
    static void createTables(PostgresServer pg, MariaDbServer maria) {
        postgres = new Database("PostgreSQL", pg.r2dbcUrl(), false);
        mariaDb = new Database("MariaDB", maria.r2dbcUrl(), true);
        environments = new Environments();
        firstId = IDS.get();
        for (Database db : List.of(postgres, mariaDb)) {
            ConnectionFactory admin = environments.pool(db, null);
            execute(admin, "CREATE TABLE IF NOT EXISTS " + ROWS + " (id bigint PRIMARY KEY, status varchar(32) NOT NULL, "
                    + "amount bigint NOT NULL, fencing_token bigint, fencing_owner varchar(64))");
            execute(admin, "CREATE TABLE IF NOT EXISTS " + AUDIT + " (id bigint NOT NULL, note varchar(32) NOT NULL)");
            FENCE.create(admin).block(BOUND);
        }
        LEASES.create(environments.pool(postgres, null)).block(BOUND);
    }

    @AfterAll
    static void dropRows() {
        if (environments == null) {
            return;
        }
        long lastId = IDS.get();
        for (Database db : List.of(postgres, mariaDb)) {
            ConnectionFactory admin = environments.pool(db, null);
            execute(admin, "DELETE FROM " + ROWS + " WHERE id >= " + firstId + " AND id <= " + lastId);
            execute(admin, "DELETE FROM " + AUDIT + " WHERE id >= " + firstId + " AND id <= " + lastId);
            execute(admin, "DELETE FROM " + FENCE.name() + " WHERE resource LIKE 'fenced:{envm-%'");
        }
        execute(environments.pool(postgres, null), "DELETE FROM " + LEASES.name() + " WHERE lock_id LIKE 'fenced:{envm-%'");
        environments.close();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cells")
    void aStaleWriteAfterASnapshotReadIsRefusedAndRollsTheWholeTransactionBack(Cell cell) {
        try {
            replay(cell);
        } catch (AssertionError e) {
            // Reports name cells by index; the message names the environment.
            throw new AssertionError(cell + ": " + e.getMessage(), e);
        }
    }

    /**
     * Inside a transaction on PostgreSQL, a {@code DatabaseClient} used on the MariaDB pool binds that pool's
     * connection, in auto-commit mode, to the same transaction context: that is no transaction to join, so
     * {@code inTransaction} on the MariaDB pool runs its work in a transaction of its own, which commits, and the
     * PostgreSQL transaction's rollback does not undo it.
     */
    @Test
    void anotherFactorysAutoCommitConnectionBoundToTheTransactionIsNoTransactionToJoin() {
        long id = IDS.incrementAndGet();
        ConnectionFactory pgPool = environments.pool(postgres, null);
        ConnectionFactory mariaPool = environments.pool(mariaDb, null);
        TestLease lease = new TestLease("envm-two-factories-" + id, STALE, "holder");
        String insert = "INSERT INTO " + AUDIT + " (id, note) VALUES (" + id + ", 'work')";
        Mono<Object> transaction = Environments.operator(pgPool, null).transactional(audit(pgPool, id, "pg")
                .then(DatabaseClient.create(mariaPool).sql("SELECT 1").fetch().first())
                .then(FENCE.inTransaction(mariaPool, lease, c -> statement(c, insert)).then())
                .then(Mono.error(new IllegalStateException("the PostgreSQL transaction fails"))));
        StepVerifier.create(transaction).verifyErrorSatisfies(e -> assertThat(e)
                .isExactlyInstanceOf(IllegalStateException.class).hasMessage("the PostgreSQL transaction fails"));
        assertThat(query(mariaPool, "SELECT count(*) FROM " + AUDIT + " WHERE id = " + id)).isEqualTo(1L);
        assertThat(query(pgPool, "SELECT count(*) FROM " + AUDIT + " WHERE id = " + id)).isEqualTo(0L);
    }

    private static void replay(Cell cell) {
        long id = IDS.incrementAndGet();
        Database db = cell.setting().mariaDb ? mariaDb : postgres;
        ConnectionFactory admin = environments.pool(db, null);
        String lock = "envm-" + id;
        TestLease stale = new TestLease(lock, STALE, "old");
        TestLease newer = new TestLease(lock, NEWER, "new");
        // The stale holder wrote the row, advanced the fence and was granted the lock, all committed.
        execute(admin, "INSERT INTO " + ROWS + " VALUES (" + id + ", 'OLD', 1, " + STALE + ", 'old')");
        execute(admin, "INSERT INTO " + FENCE.name() + " (resource, last_token, last_owner, lock_id) VALUES ('"
                + stale.lockId() + "', " + STALE + ", 'old', '" + stale.lockId() + "')");
        if (!db.mariaDb()) {
            execute(admin, "INSERT INTO " + LEASES.name() + " (lock_id, owner, token, expires_at) VALUES ('"
                    + stale.lockId() + "', 'old', " + STALE + ", clock_timestamp() + interval '1 hour')");
        }
        Mono<Void> newerHolderCommits = Mono.usingWhen(admin.create(), c -> Flux.concat(
                        statement(c, "UPDATE " + ROWS + " SET status = 'NEWER', fencing_token = " + NEWER
                                + ", fencing_owner = 'new' WHERE id = " + id),
                        statement(c, "UPDATE " + FENCE.name() + " SET last_token = " + NEWER + ", last_owner = 'new' "
                                + "WHERE resource = '" + stale.lockId() + "'"),
                        db.mariaDb() ? Mono.<Long>empty() : statement(c, "UPDATE " + LEASES.name() + " SET owner = 'new', token = "
                                + NEWER + " WHERE lock_id = '" + stale.lockId() + "'"))
                .then(), Connection::close);

        StepVerifier.create(inEnvironment(cell, db, (own, given) -> readFirst(own, id)
                        .then(newerHolderCommits)
                        .then(audit(own, id, "stale"))
                        .then(write(cell.path(), given, stale, id, "STALE"))))
                .expectErrorSatisfies(e -> refused(cell, e, stale, id))
                .verify(BOUND);

        assertThat(query(admin, "SELECT count(*) FROM " + AUDIT + " WHERE id = " + id))
                .as("the stale transaction rolled back, its audit row too").isEqualTo(0L);
        assertThat(query(admin, "SELECT status FROM " + ROWS + " WHERE id = " + id)).isEqualTo("NEWER");
        assertThat(query(admin, "SELECT fencing_token FROM " + ROWS + " WHERE id = " + id)).isEqualTo(NEWER);

        // The library never commits the caller's transaction half-way: the caller failing after the write undoes it.
        StepVerifier.create(inEnvironment(cell, db, (own, given) -> readFirst(own, id)
                        .then(audit(own, id, "undone"))
                        .then(write(cell.path(), given, newer, id, "UNDONE"))
                        .then(Mono.error(new IllegalStateException("the caller fails after the write")))))
                .expectErrorMessage("the caller fails after the write")
                .verify(BOUND);
        assertThat(query(admin, "SELECT count(*) FROM " + AUDIT + " WHERE id = " + id + " AND note = 'undone'"))
                .as("the caller's rollback undoes its statements").isEqualTo(0L);
        assertThat(query(admin, "SELECT status FROM " + ROWS + " WHERE id = " + id)).as("and the write").isEqualTo("NEWER");

        StepVerifier.create(inEnvironment(cell, db, (own, given) -> readFirst(own, id)
                        .then(audit(own, id, "fresh"))
                        .then(write(cell.path(), given, newer, id, "FRESH"))))
                .thenConsumeWhile(value -> true)
                .expectComplete()
                .verify(BOUND);
        assertThat(query(admin, "SELECT count(*) FROM " + AUDIT + " WHERE id = " + id + " AND note = 'fresh'"))
                .as("the newer holder's transaction commits").isEqualTo(1L);
        assertThat(query(admin, "SELECT status FROM " + ROWS + " WHERE id = " + id)).isEqualTo("FRESH");
    }

    /** What each cell's refusal must be (the class javadoc's list). */
    private static void refused(Cell cell, Throwable e, TestLease stale, long id) {
        String row = ROWS + " (id = " + id + ")";
        boolean fencePath = cell.path() == Path.ADVANCE || cell.path() == Path.IN_TRANSACTION;
        String target = fencePath ? "fence " + FENCE.name() + " (resource = " + stale.lockId() + ")" : row;
        if (cell.setting().abortsOnChangedSnapshot()) {
            assertThat(e).isInstanceOf(FencedWriteConflictException.class).hasMessage("The fenced write to " + target
                    + " under lock '" + stale.name() + "' conflicted with a concurrent transaction (the database could not "
                    + "serialize it, SQLSTATE 40001); nothing of it was accepted: roll the transaction back and retry it");
            assertThat(((FencedWriteConflictException) e).sqlState()).isEqualTo("40001");
            assertThat(stale.reportedNewerToken).as("nothing was read: the lease is not told").hasValue(-1);
        } else if (cell.path() == Path.CHECK_LEASE) {
            assertThat(e).isInstanceOf(LeaseCheckFailedException.class).hasMessage("The lease on lock '" + stale.name()
                    + "' (lock id " + stale.lockId() + ") with fencing token " + STALE + " is not held in lease table "
                    + LEASES.name() + ": its row holds another grant, with token " + NEWER + "; nothing was written");
        } else {
            assertThat(e).isInstanceOf(StaleFencingTokenException.class).hasMessage("Write to " + target
                    + " with fencing token " + STALE + " of lock '" + stale.name() + "' was rejected: storage holds token "
                    + NEWER);
            assertThat(stale.reportedNewerToken).as("the lease is told").hasValue(NEWER);
            assertThat(stale.isHeld()).isFalse();
        }
    }

    /** Runs {@code work} in one transaction of the cell's environment, given the factory the library gets. */
    private static Flux<Object> inEnvironment(Cell cell, Database db, BiFunction<ConnectionFactory, ConnectionFactory, Mono<?>> work) {
        Level poolLevel = cell.scope() == Scope.POOL_DEFAULT ? cell.setting().level : null;
        Level transactionLevel = cell.scope() == Scope.TRANSACTION ? cell.setting().level : null;
        ConnectionFactory pool = environments.pool(db, poolLevel);
        return switch (cell.arrival()) {
            case POOL -> Environments.operator(pool, transactionLevel).transactional(body(work, pool, pool));
            case PROXY -> Environments.operator(pool, transactionLevel)
                    .transactional(body(work, pool, Environments.proxy(pool)));
            case PLAIN -> {
                ConnectionFactory plain = environments.plainFactory(db, poolLevel);
                yield Environments.operator(plain, transactionLevel).transactional(body(work, plain, plain));
            }
            case TRANSACTIONAL -> {
                Environments.Runner runner = environments.transactional(db.name() + poolLevel, pool);
                Supplier<Flux<Object>> inside = () -> body(work, pool, pool);
                yield transactionLevel == null ? runner.atDefault(inside) : switch (transactionLevel) {
                    case READ_COMMITTED -> runner.readCommitted(inside);
                    case REPEATABLE_READ -> runner.repeatableRead(inside);
                    case SERIALIZABLE -> runner.serializable(inside);
                };
            }
            case OWN_TRANSACTION -> Environments.ownTransaction(pool, transactionLevel,
                    c -> {
                        ConnectionFactory handedOut = HandedOutConnection.factory(c, pool);
                        return body(work, handedOut, handedOut);
                    });
            case MANAGER_ON_PROXY -> {
                ConnectionFactory proxy = Environments.proxy(pool);
                yield Environments.operator(proxy, transactionLevel).transactional(body(work, proxy, pool));
            }
        };
    }

    /**
     * The work, given the factory of the caller's own statements ({@code own}: the one its transaction manager runs on)
     * and the one the library is given.
     */
    private static Flux<Object> body(BiFunction<ConnectionFactory, ConnectionFactory, Mono<?>> work, ConnectionFactory own,
            ConnectionFactory given) {
        return Flux.defer(() -> work.apply(own, given).map(value -> (Object) value));
    }

    /** The transaction's first statement, which fixes its snapshot. */
    private static Mono<Void> readFirst(ConnectionFactory factory, long id) {
        return DatabaseClient.create(factory).sql("SELECT amount FROM " + ROWS + " WHERE id = " + id).fetch().all().then();
    }

    /** Another statement of the transaction, which must commit or roll back with the fenced write. */
    private static Mono<Void> audit(ConnectionFactory factory, long id, String note) {
        return DatabaseClient.create(factory).sql("INSERT INTO " + AUDIT + " (id, note) VALUES (" + id + ", '" + note + "')")
                .fetch().rowsUpdated().then();
    }

    /** The write path under test, run by {@code lease} in the transaction, setting the row's status. */
    private static Mono<?> write(Path path, ConnectionFactory factory, FencedLease lease, long id, String status) {
        FencedWrite write = FencedWrite.into(ROWS).key("id", id).set("status", status).set("amount", 2);
        String plainUpdate = "UPDATE " + ROWS + " SET status = '" + status + "' WHERE id = " + id;
        return switch (path) {
            case UPDATE -> write.update(factory, lease);
            case UPSERT -> write.upsert(factory, lease);
            case CLAIM -> write.claim(factory, lease, r -> r.get("status", String.class));
            case ADVANCE -> DatabaseClient.create(factory).inConnection(c -> FENCE.advance(c, lease)
                    .then(Mono.from(c.createStatement(plainUpdate).execute()).flatMap(r -> Mono.from(r.getRowsUpdated()))));
            case IN_TRANSACTION -> FENCE.inTransaction(factory, lease, c -> Flux.from(c.createStatement(plainUpdate).execute())
                    .flatMap(Result::getRowsUpdated)).then();
            case CHECK_LEASE -> write.checkLease(LEASES).update(factory, lease);
            case DATABASE_CLIENT -> FencedDatabaseClient.of(DatabaseClient.create(factory)).update(write, lease);
            case ENTITY_TEMPLATE -> FencedEntityTemplate.of(new R2dbcEntityTemplate(factory))
                    .update(new EnvRow(id, status, 2, null, null), lease);
        };
    }

    private static Mono<Long> statement(Connection c, String sql) {
        return Flux.from(c.createStatement(sql).execute()).flatMap(Result::getRowsUpdated).reduce(0L, Long::sum);
    }

    private static void execute(ConnectionFactory factory, String sql) {
        Mono.usingWhen(factory.create(), c -> statement(c, sql), Connection::close).block(BOUND);
    }

    private static @Nullable Object query(ConnectionFactory factory, String sql) {
        return Mono.usingWhen(factory.create(), c -> Flux.from(c.createStatement(sql).execute())
                        .flatMap(result -> result.map((row, meta) -> {
                            Object value = row.get(0);
                            return value instanceof Number n && !(value instanceof Long) ? (Object) n.longValue() : value;
                        }))
                        .next(),
                Connection::close).block(BOUND);
    }
}
