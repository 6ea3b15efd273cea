package dev.fenced.r2dbc;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.LeaseNotHeldException;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * A fence table: one row per resource holding the newest token storage has accepted for it. For tables
 * that cannot carry token columns, or a lock that guards several rows or tables.
 *
 * <p>{@link #advance} moves a resource's fence to the lease's token as the first statement of the caller's
 * transaction, or fails with {@link dev.fenced.lock.StaleFencingTokenException} (a refusal is explained with a locking
 * read, which sees the latest committed fence whatever the isolation level), or with
 * {@link FencedWriteConflictException} where the database cannot serialize it with a concurrent transaction
 * (PostgreSQL under {@code REPEATABLE READ} or {@code SERIALIZABLE}, a deadlock); the row stays locked until
 * the transaction ends, so a stale holder cannot commit in between: the advance is the claim step of the
 * resources it fences. {@link #inTransaction} does the whole thing: inside the subscriber's Spring transaction it
 * advances and runs the caller's statements there; elsewhere it begins, advances, runs them and commits; on any
 * error (a stale token included) it rolls back, so nothing is committed. PostgreSQL and MariaDB/MySQL.
 *
 * <p>A row holds the tokens of one lock: it is keyed by the lease's {@linkplain FencedLease#lockId() lock id}
 * (key prefix and name) by default, and a row named by the caller records the lock id of its first lease and
 * refuses the leases of other locks ({@link FenceLockMismatchException}).
 *
 * <pre>{@code
 * FenceTable fence = FenceTable.named("fenced_fence");
 * fence.create(connectionFactory).block();                     // once, or run fence-table.sql yourself
 *
 * locks.withLease("ledger:7", lease -> fence.inTransaction(connectionFactory, lease, connection ->
 *         connection.createStatement("UPDATE ledger SET total = total + 10 WHERE id = 7").execute()));
 * }</pre>
 *
 * <p>The DDL ships as the resource {@code dev/fenced/r2dbc/fence-table.sql} (table {@code fenced_fence}).
 *
 * <p>Every method is cold: subscribing sends the statements. Cancelling {@link #inTransaction} rolls the
 * transaction back; cancelling {@link #advance} leaves the caller's transaction to the caller. Signals arrive
 * on the driver's I/O thread. Immutable and thread-safe.
 */
public final class FenceTable {

    /** The default table name. */
    public static final String DEFAULT_NAME = "fenced_fence";

    private static final String DDL_RESOURCE = "fence-table.sql";

    private final String name;
    private final FencingRule rule;
    private final @Nullable String guard;
    private final @Nullable LeaseCheck leaseCheck;

    private FenceTable(String name, FencingRule rule, @Nullable String guard, @Nullable LeaseCheck leaseCheck) {
        this.name = name;
        this.rule = rule;
        this.guard = guard;
        this.leaseCheck = leaseCheck;
    }

    /**
     * The fence table {@value #DEFAULT_NAME}.
     *
     * @return the table
     */
    public static FenceTable defaultTable() {
        return named(DEFAULT_NAME);
    }

    /**
     * A fence table with the given name and the rule {@link FencingRule#SAME_LEASE_OR_NEWER}.
     *
     * @param table the table name, optionally schema-qualified
     * @return the table
     */
    public static FenceTable named(String table) {
        return new FenceTable(Identifiers.table(table, "fence table name"), FencingRule.SAME_LEASE_OR_NEWER, null, null);
    }

    /**
     * The same table with another rule.
     *
     * @param rule the rule
     * @return a new instance
     */
    public FenceTable rule(FencingRule rule) {
        return new FenceTable(name, Objects.requireNonNull(rule, "rule must not be null"), guard, leaseCheck);
    }

    /**
     * The same table, for work guarded by the lock {@code lockName}: {@link #inTransaction(ConnectionFactory,
     * Function)} takes the lease on that name from the Reactor Context (inside nested {@code withLease} scopes
     * too), and a lease of another lock is refused with {@link IllegalArgumentException} before any SQL.
     * Without a guard, a Context-driven call takes the Context's only lease and fails with
     * {@link dev.fenced.lock.AmbiguousLeaseException} when there are several.
     *
     * @param lockName the lock name, as given to {@code withLease}; the rule of lock names applies
     * @return a new instance
     * @throws IllegalArgumentException when the name is not a valid lock name (null, blank, over 1,024 characters,
     *     control characters or braces), with the message {@code acquire} gives for it
     */
    public FenceTable guardedBy(String lockName) {
        return new FenceTable(name, rule, Leases.requireGuard(lockName), leaseCheck);
    }

    /**
     * The same table, checking the lease before every advance: in the advance's transaction, the lease's row in the
     * lease table of a lock client on PostgreSQL ({@code FencedLockClient.builder().postgres(connectionFactory,
     * leases)}) must hold the lease's owner and token and be unexpired by the database's clock, and it stays locked
     * ({@code FOR KEY SHARE}) until the transaction ends, so no other owner can be granted the lock before the
     * transaction's writes commit; the holder's renewals and release do not wait for that lock. A refusal fails
     * with {@link LeaseCheckFailedException} before the fence moves, and {@link #inTransaction} rolls back. On
     * MariaDB/MySQL every advance of this table fails with {@link IllegalStateException} before any statement of the
     * advance ({@link #inTransaction} rolls back). As
     * {@link FencedWrite#checkLease} says: the next acquirer waits while the transaction is open, so keep it short.
     *
     * @param leases the lease table of the lock client that granted the leases
     * @return a new instance
     */
    public FenceTable checkLease(dev.fenced.lock.PostgresLeaseTable leases) {
        return new FenceTable(name, rule, guard, LeaseCheck.of(leases));
    }

    /**
     * The PostgreSQL DDL of this table, from the shipped resource {@code fence-table.sql} (MariaDB/MySQL's is
     * {@code fence-table-mariadb.sql}, next to it).
     *
     * @return the {@code CREATE TABLE IF NOT EXISTS} statement
     */
    public String ddl() {
        return ddl(SqlDialect.POSTGRESQL);
    }

    private String ddl(SqlDialect dialect) {
        String resource = dialect.fenceDdlResource();
        try (InputStream in = FenceTable.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new IllegalStateException("Missing resource " + resource);
            }
            String sql = new String(in.readAllBytes(), StandardCharsets.UTF_8);
            return sql.replace("CREATE TABLE IF NOT EXISTS " + DEFAULT_NAME, "CREATE TABLE IF NOT EXISTS " + dialect.quote(name));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * Creates the table if it does not exist (with the DDL of the connection's database), and adds the
     * {@code lock_id} column to a table created by an earlier version (its rows then take the lock id of the first
     * lease that advances them). Runs on a connection of its own.
     *
     * @param connectionFactory the connection factory
     * @return completion
     */
    public Mono<Void> create(ConnectionFactory connectionFactory) {
        Objects.requireNonNull(connectionFactory, "connectionFactory must not be null");
        return Mono.usingWhen(connectionFactory.create(), c -> {
            SqlDialect dialect = SqlDialect.of(c);
            // Reading the resource is blocking I/O: keep it off the caller's (possibly event-loop) thread.
            return Mono.fromCallable(() -> ddl(dialect))
                    .subscribeOn(Schedulers.boundedElastic())
                    .flatMap(ddl -> Statements.rowsUpdated(c.createStatement(ddl), schemaDescription(dialect)))
                    .then(Statements.rowsUpdated(c.createStatement("ALTER TABLE " + dialect.quote(name)
                            + " ADD COLUMN IF NOT EXISTS lock_id " + dialect.textKeyType()), schemaDescription(dialect)))
                    .then();
        }, Connection::close);
    }

    /**
     * Moves the fence of the lease's lock to the lease's token, on {@code connection}: call it first in the
     * transaction whose writes it protects. The fence row is the one of the lease's
     * {@linkplain FencedLease#lockId() lock id} (key prefix and name), so two key prefixes, which have two
     * token counters, never share a row.
     *
     * @param connection the connection, in a transaction (an auto-commit connection is refused with
     *     {@link IllegalStateException})
     * @param lease the lease
     * @return completion; {@link dev.fenced.lock.StaleFencingTokenException} when the fence holds a newer token
     */
    public Mono<Void> advance(Connection connection, FencedLease lease) {
        return Mono.defer(() -> advance(connection, lease, Objects.requireNonNull(lease, "lease must not be null").lockId()));
    }

    /**
     * Moves the fence of {@code resource} to the lease's token, on {@code connection}. The row records the
     * lease's {@linkplain FencedLease#lockId() lock id}; a lease of another lock is refused with
     * {@link FenceLockMismatchException} and nothing is written, since tokens of two locks cannot be compared.
     *
     * @param connection the connection, in a transaction
     * @param lease the lease
     * @param resource the fenced resource (the lease's lock id by default)
     * @return completion; {@link dev.fenced.lock.StaleFencingTokenException} when the fence holds a newer token,
     *     {@link FenceLockMismatchException} when it holds the tokens of another lock
     */
    public Mono<Void> advance(Connection connection, FencedLease lease, String resource) {
        return Mono.defer(() -> {
            Objects.requireNonNull(connection, "connection must not be null");
            Objects.requireNonNull(resource, "resource must not be null");
            LeaseNotHeldException notHeld = Leases.notHeld(lease);
            if (notHeld != null) {
                return Mono.error(notHeld);
            }
            IllegalArgumentException wrongLock = Leases.wrongLock(lease, guard, description());
            if (wrongLock != null) {
                return Mono.error(wrongLock);
            }
            if (connection.isAutoCommit()) {
                // Committed on its own, the fence would protect nothing: the caller's writes could follow a
                // newer holder's.
                return Mono.error(new IllegalStateException("FenceTable.advance needs a transaction: the connection is in "
                        + "auto-commit mode; begin a transaction first, or use inTransaction(...)"));
            }
            SqlDialect dialect = SqlDialect.of(connection);
            Mono<Void> move = move(connection, dialect, lease, resource);
            return (leaseCheck == null ? move : leaseCheck.verify(connection, lease, description()).then(move))
                    .onErrorMap(e -> SqlErrors.conflict(e, lease.name(), target(resource)));
        });
    }

    private Mono<Void> move(Connection connection, SqlDialect dialect, FencedLease lease, String resource) {
        List<Sql.Param> params = List.of(Sql.Param.of(resource), Sql.Param.of(lease.token()), Sql.Param.of(lease.ownerId()),
                Sql.Param.of(lease.lockId()));
        Mono<Void> vanished = Mono.error(() -> new IllegalStateException("The fence row of " + resource
                + " vanished while it was being advanced"));
        if (dialect.atomicUpsert()) {
            return guarded(connection, dialect, lease, resource, upsertSql(dialect), params, vanished, true);
        }
        // Update, else insert, else (another transaction inserted the row meanwhile) update.
        Sql insert = insertSql(dialect);
        Mono<Void> insertOrUpdate = Mono.defer(() -> Statements.rowsUpdated(
                        insert.bind(connection.createStatement(insert.text()), params), schemaDescription(dialect)))
                .then()
                .onErrorResume(SqlErrors::isDuplicateKey, raced -> guarded(connection, dialect, lease, resource,
                        updateSql(dialect), params, vanished, true));
        return guarded(connection, dialect, lease, resource, updateSql(dialect), params, insertOrUpdate, true);
    }

    /**
     * Runs a guarded statement of the fence, which alone decides acceptance; when it moves nothing, explains why with
     * a locking read, runs {@code missing} when there is no row, and decides once more with the statement if the row
     * changed in between.
     */
    private Mono<Void> guarded(Connection connection, SqlDialect dialect, FencedLease lease, String resource, Sql sql,
            List<Sql.Param> params, Mono<Void> missing, boolean again) {
        return Mono.defer(() -> Statements.rowsUpdated(sql.bind(connection.createStatement(sql.text()), params),
                        schemaDescription(dialect)))
                .flatMap(rows -> rows > 0 ? Mono.<Void>empty() : rejected(connection, dialect, lease, resource, missing,
                        again ? guarded(connection, dialect, lease, resource, sql, params, missing, false) : null));
    }

    /** PostgreSQL: one {@code INSERT … ON CONFLICT … DO UPDATE … WHERE <same lock> AND <rule>}. Values: resource, token, owner, lock id. */
    private Sql upsertSql(SqlDialect dialect) {
        return SqlCache.get("FENCE-UPSERT\u0000" + dialect + "\u0000" + name + "\u0000" + rule, () -> {
            String table = dialect.quote(name);
            Sql.Builder sql = new Sql.Builder(dialect).append("INSERT INTO " + table
                            + " (resource, last_token, last_owner, lock_id) VALUES (").param(0).append(", ").param(1).append(", ")
                    .param(2).append(", ").param(3).append(") ON CONFLICT (resource) DO UPDATE"
                            + " SET last_token = EXCLUDED.last_token, last_owner = EXCLUDED.last_owner,"
                            + " lock_id = EXCLUDED.lock_id, updated_at = " + dialect.now()
                            + " WHERE (" + table + ".lock_id IS NULL OR " + table + ".lock_id = EXCLUDED.lock_id) AND ");
            rule.appendCondition(sql, Sql.Operand.sql(table + ".last_token"), Sql.Operand.sql(table + ".last_owner"),
                    Sql.Operand.sql("EXCLUDED.last_token"), Sql.Operand.sql("EXCLUDED.last_owner"));
            return sql.build();
        });
    }

    /** The guarded update of an existing fence row, for dialects without a guarded upsert. */
    private Sql updateSql(SqlDialect dialect) {
        return SqlCache.get("FENCE-UPDATE\u0000" + dialect + "\u0000" + name + "\u0000" + rule, () -> {
            Sql.Builder sql = new Sql.Builder(dialect).append("UPDATE ").id(name).append(" SET last_token = ").param(1)
                    .append(", last_owner = ").param(2).append(", lock_id = ").param(3).append(", updated_at = " + dialect.now())
                    .append(" WHERE resource = ").param(0).append(" AND (lock_id IS NULL OR lock_id = ").param(3).append(") AND ");
            rule.appendCondition(sql, Sql.Operand.sql("last_token"), Sql.Operand.sql("last_owner"), Sql.Operand.value(1),
                    Sql.Operand.value(2));
            return sql.build();
        });
    }

    private Sql insertSql(SqlDialect dialect) {
        return SqlCache.get("FENCE-INSERT\u0000" + dialect + "\u0000" + name, () -> new Sql.Builder(dialect).append("INSERT INTO ")
                .id(name).append(" (resource, last_token, last_owner, lock_id) VALUES (").param(0).append(", ").param(1)
                .append(", ").param(2).append(", ").param(3).append(")").build());
    }

    /**
     * The advance moved nothing: reads the fence row to tell another lock's row, a newer token, no row
     * ({@code missing}), or a row that changed in between ({@code again}; {@code null} the second time). First with
     * a plain read, which takes no lock: another lock's row or a token the rule refuses explains the refusal, and the
     * refused transaction then holds no lock that the valid holder's next advance would wait for. Only when the plain
     * read contradicts the refusal (no row, or one the rule accepts: it may be the transaction's snapshot, not the row
     * the statement judged) is it read again with a locking read ({@link SqlDialect#lockingRead}). On PostgreSQL the
     * plain read shows the stored token even under a snapshot: the guarded upsert locks the latest version and fails
     * with {@code 40001} when it changed after the snapshot (tested in {@code FenceTableIT}). Under MariaDB's
     * {@code REPEATABLE READ} the token reported, and the floor raised, may be a snapshot's, lower than the stored
     * one; the refusal itself is exact.
     */
    private Mono<Void> rejected(Connection connection, SqlDialect dialect, FencedLease lease, String resource,
            Mono<Void> missing, @Nullable Mono<Void> again) {
        return stored(connection, dialect, resource, false)
                .filter(stored -> (stored.lockId() != null && !stored.lockId().equals(lease.lockId()))
                        || !rule.accepts(stored.token(), stored.owner(), lease.token(), lease.ownerId()))
                .flatMap(stored -> explained(lease, resource, stored, null))
                .switchIfEmpty(Mono.defer(() -> lockedRejection(connection, dialect, lease, resource, missing, again)));
    }

    private Mono<Statements.Stored> stored(Connection connection, SqlDialect dialect, String resource, boolean locking) {
        Sql select = SqlCache.get("FENCE-STORED\u0000" + dialect + "\u0000" + name + "\u0000" + locking, () -> {
            Sql.Builder sql = new Sql.Builder(dialect).append("SELECT last_token, last_owner, lock_id FROM ").id(name)
                    .append(" WHERE resource = ").param(0);
            return (locking ? sql.append(dialect.lockingRead()) : sql).build();
        });
        return Statements.stored(select.bind(connection.createStatement(select.text()), List.of(Sql.Param.of(resource))),
                schemaDescription(dialect));
    }

    /** {@link #rejected}, once the plain read contradicted the refusal: the row as committed now decides. */
    private Mono<Void> lockedRejection(Connection connection, SqlDialect dialect, FencedLease lease, String resource,
            Mono<Void> missing, @Nullable Mono<Void> again) {
        return stored(connection, dialect, resource, true)
                .map(Optional::of)
                .defaultIfEmpty(Optional.empty())
                .flatMap(found -> {
                    if (found.isEmpty()) {
                        return missing;
                    }
                    return explained(lease, resource, found.get(), again);
                });
    }

    /** Why the stored fence row refused the lease; {@code again} decides once more if the row now accepts it. */
    private Mono<Void> explained(FencedLease lease, String resource, Statements.Stored stored, @Nullable Mono<Void> again) {
        String fencedBy = stored.lockId();
        if (fencedBy != null && !fencedBy.equals(lease.lockId())) {
            return Mono.<Void>error(FenceLockMismatchException.of(lease.name(), name, resource, fencedBy,
                    lease.lockId()));
        }
        if (rule.accepts(stored.token(), stored.owner(), lease.token(), lease.ownerId())) {
            // Changed after the statement; the locking read holds it now (in a transaction): decide again.
            return again != null ? again
                    : Mono.<Void>error(FencedWriteConflictException.changedDuringWrite(lease.name(), target(resource)));
        }
        return Mono.<Void>error(Leases.rejected(lease, target(resource), stored.token() == null ? 0 : stored.token(),
                stored.owner()));
    }

    private String target(String resource) {
        return "fence " + name + " (resource = " + resource + ")";
    }

    /**
     * Runs {@code work} in a transaction after advancing the fence of the lease's lock
     * ({@link #advance(Connection, FencedLease)}). Inside the subscriber's Spring transaction on
     * {@code connectionFactory} or on a factory it wraps ({@code TransactionAwareConnectionFactoryProxy},
     * {@code Wrapped#unwrap()}; needs {@code spring-r2dbc}), both run on its connection and commit or roll back
     * with it: an error, a stale token included, reaches the transaction's owner, which rolls back. Likewise when the
     * factory hands out a connection with a transaction open (auto-commit off alone is not one on MariaDB, see the
     * README's tested environments): neither begun nor
     * committed here. Otherwise on a connection of its own: begins a transaction, commits when the work completes,
     * rolls back on any error (a stale token included, before the work runs) and on cancellation.
     *
     * @param connectionFactory the connection factory
     * @param lease the lease
     * @param work the caller's statements, given the connection
     * @param <T> the type of the work's results
     * @return the work's results
     */
    public <T> Flux<T> inTransaction(ConnectionFactory connectionFactory, FencedLease lease,
            Function<? super Connection, ? extends Publisher<T>> work) {
        Objects.requireNonNull(work, "work must not be null");
        return Connections.inTransaction(connectionFactory, c -> advance(c, lease).thenMany(Flux.defer(() -> work.apply(c))));
    }

    /**
     * As {@link #inTransaction(ConnectionFactory, FencedLease, Function)}, with the lease of the enclosing
     * {@code withLease} scope, found in the Reactor Context: the lease on the {@linkplain #guardedBy(String)
     * guarding lock}, or, when none is named, the Context's only lease.
     *
     * @param connectionFactory the connection factory
     * @param work the caller's statements
     * @param <T> the type of the work's results
     * @return the work's results; fails before any SQL with {@link IllegalStateException} when the Context holds
     *     no such lease, and with {@link dev.fenced.lock.AmbiguousLeaseException} when it holds several and no
     *     guard is named
     */
    public <T> Flux<T> inTransaction(ConnectionFactory connectionFactory,
            Function<? super Connection, ? extends Publisher<T>> work) {
        return Leases.fromContext(guard, description()).flatMapMany(lease -> inTransaction(connectionFactory, lease, work));
    }

    /**
     * The table name.
     *
     * @return the name as given
     */
    public String name() {
        return name;
    }

    @Override
    public String toString() {
        return "FenceTable{" + name + ", rule=" + rule + (guard == null ? "" : ", guardedBy=" + guard)
                + (leaseCheck == null ? "" : ", checkLease=" + leaseCheck.tableName()) + "}";
    }

    /** The fence advance, as the start of an error message. */
    private String description() {
        return "A fence advance of " + name;
    }

    private String schemaDescription(SqlDialect dialect) {
        return "fence table " + dialect.quote(name) + " (create it with FenceTable.create)";
    }
}
