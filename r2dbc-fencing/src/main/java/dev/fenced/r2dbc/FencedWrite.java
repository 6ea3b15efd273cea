package dev.fenced.r2dbc;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.LeaseNotHeldException;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Readable;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.StringJoiner;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A token-guarded write of one row (or the rows matching a key) of a table that carries the fencing token
 * and owner in two columns (by default {@code fencing_token bigint} and {@code fencing_owner text}), or the
 * token alone ({@link #fencingColumn(String)}, with the strict rule).
 *
 * <pre>{@code
 * FencedWrite settle = FencedWrite.into("invoices")
 *         .key("id", 42)
 *         .set("status", "PAID")
 *         .set("amount", 1200);
 *
 * locks.withLease("invoice:42", lease -> settle.update(connectionFactory, lease));
 * }</pre>
 *
 * <p>{@link #update} runs {@code UPDATE … SET …, token = ?, owner = ? WHERE key AND <rule>}: it emits the
 * number of rows updated, or fails with {@link dev.fenced.lock.StaleFencingTokenException} (the presented and
 * the stored token) when the rule rejects the write, or {@link FencedRowNotFoundException} when no row
 * matches the key. The guarded statement alone decides acceptance. On PostgreSQL a refusal is explained with the
 * locking read {@code FOR KEY SHARE}, which does not make the valid holder's next {@code UPDATE} wait for the refused
 * writer's transaction; at {@code REPEATABLE READ} and {@code SERIALIZABLE} it may return the snapshot's version of a
 * row changed since the snapshot, so there a token it shows that the rule refuses is checked with {@code FOR SHARE}
 * inside a savepoint rolled back at once: the stored token when the row is unchanged, else
 * {@link FencedWriteConflictException#refusedUnderSnapshot} (retry the transaction). On MariaDB/MySQL it is explained with a plain read, which
 * takes no lock, and only when that read contradicts the refusal (no row, or one the rule accepts: under InnoDB's
 * {@code REPEATABLE READ} it may be the transaction's snapshot) with the locking read {@code FOR UPDATE}; so under
 * InnoDB's {@code REPEATABLE READ} the stored token reported (and the floor raised) may be a snapshot's, lower than
 * the stored one, the refusal itself being exact. Where the database cannot serialize the write with a concurrent transaction (PostgreSQL under
 * {@code REPEATABLE READ} or {@code SERIALIZABLE}, when a newer holder wrote the row after this transaction's first
 * read; a deadlock), it fails with {@link FencedWriteConflictException}, never as a success or a missing row. When
 * no row is visible at PostgreSQL's {@code REPEATABLE READ} or {@code SERIALIZABLE}, it fails with
 * {@link FencedRowNotFoundException#invisibleToSnapshot}, whose message says that a row inserted after the snapshot
 * is invisible too: retry in a new transaction to tell.
 * {@link #upsert} inserts rows that may not exist yet and guards the update of those that do.
 * {@link #claim} is the first step of a read-modify-write: it claims the row with the lease's token, then reads
 * it. A lease that is not held is refused with {@link LeaseNotHeldException} before any SQL is sent. When
 * storage holds a newer token, the lease is told ({@link FencedLease#reportRejectedWrite}); inside
 * {@code withLease} the work then fails with {@link dev.fenced.lock.LeaseLostException} whose cause is the
 * rejection.
 *
 * <p>Databases: PostgreSQL and MariaDB/MySQL, told apart by the connection's metadata; the SQL of each shape and
 * dialect is built once. Transactions: on a {@code Connection} the write runs in whatever transaction it has; on
 * a {@code ConnectionFactory} it joins the subscriber's Spring transaction on that factory or on one it wraps
 * ({@code TransactionAwareConnectionFactoryProxy} and other {@code DelegatingConnectionFactory}s,
 * {@code Wrapped#unwrap()}), so a rollback undoes it and a rejected write inside
 * {@code TransactionalOperator.transactional} rolls the whole transaction back; outside one it runs on a connection
 * of its own in auto-commit mode (one with auto-commit off and no transaction open, as r2dbc-mariadb's
 * {@code setAutoCommit(false)} leaves it, gets a transaction of its own, so that the write commits). It never begins
 * or commits a transaction it did not begin: a connection that the factory hands out with a transaction open is
 * written in that transaction. Spring's {@code DatabaseClient} is
 * served by {@code FencedDatabaseClient} in {@code r2dbc-fencing-spring}.
 *
 * <p>With leases from a lock client on PostgreSQL, {@link #checkLease} also checks the lease in the lock's row of the
 * lease table, in the write's transaction and before the write, and holds the row until the transaction ends.
 *
 * <p>Every {@code update}/{@code upsert}/{@code claim} is cold: subscribing sends the statement. Cancelling after it
 * was sent does not recall it: in auto-commit mode it may still commit, and the token rule still guards it.
 * Signals arrive on the driver's I/O thread; do not block there. Immutable and thread-safe: each
 * {@code key}/{@code set}/… call returns a new instance, so one spec can be shared and extended.
 */
public final class FencedWrite {

    private final String table;
    private final List<Column> keys;
    private final List<Column> values;
    private final String tokenColumn;
    private final @Nullable String ownerColumn;
    private final FencingRule rule;
    private final @Nullable Object observations;
    private final @Nullable String guard;
    private final @Nullable LeaseCheck leaseCheck;

    private FencedWrite(String table, List<Column> keys, List<Column> values, String tokenColumn,
            @Nullable String ownerColumn, FencingRule rule, @Nullable Object observations, @Nullable String guard,
            @Nullable LeaseCheck leaseCheck) {
        this.observations = observations;
        this.guard = guard;
        this.leaseCheck = leaseCheck;
        this.table = table;
        this.keys = List.copyOf(keys);
        this.values = List.copyOf(values);
        this.tokenColumn = tokenColumn;
        this.ownerColumn = ownerColumn;
        this.rule = rule;
    }

    /**
     * Starts a write of {@code table}, with the default columns {@code fencing_token} and
     * {@code fencing_owner} and the default rule {@link FencingRule#SAME_LEASE_OR_NEWER}.
     *
     * @param table the table, optionally schema-qualified; letters, digits and underscores
     * @return a new spec
     * @throws IllegalArgumentException if the name is not a plain identifier
     */
    public static FencedWrite into(String table) {
        return new FencedWrite(Identifiers.table(table, "table name"), List.of(), List.of(),
                Identifiers.column("fencing_token", "token column"), Identifiers.column("fencing_owner", "owner column"),
                FencingRule.SAME_LEASE_OR_NEWER, null, null, null);
    }

    /**
     * Adds a key column: the write targets the row where every key column equals its value. The key columns
     * should be the table's primary key or a unique key: the rule is checked row by row, so a key that matches
     * several rows with different tokens could be updated in part. For a lock that guards several rows, use a
     * {@link FenceTable}. An upsert uses the key columns as its conflict target (they need a unique index).
     *
     * @param column the column name
     * @param value its value, bound as a parameter
     * @return a new spec
     */
    public FencedWrite key(String column, Object value) {
        Objects.requireNonNull(value, "key value must not be null");
        List<Column> next = new ArrayList<>(keys);
        next.add(new Column(Identifiers.column(column, "key column"), value, null));
        return copy(next, values).checkDistinct();
    }

    /**
     * Sets a column to a value.
     *
     * @param column the column name
     * @param value the value, bound as a parameter; use {@link #setNull(String, Class)} for {@code NULL}
     * @return a new spec
     */
    public FencedWrite set(String column, Object value) {
        Objects.requireNonNull(value, () -> "value of " + column + " must not be null; use setNull(column, type)");
        List<Column> next = new ArrayList<>(values);
        next.add(new Column(Identifiers.column(column, "column"), value, null));
        return copy(keys, next).checkDistinct();
    }

    /**
     * Sets a column to {@code NULL}.
     *
     * @param column the column name
     * @param type the Java type of the column, for the driver
     * @return a new spec
     */
    public FencedWrite setNull(String column, Class<?> type) {
        Objects.requireNonNull(type, "type must not be null");
        List<Column> next = new ArrayList<>(values);
        next.add(new Column(Identifiers.column(column, "column"), null, type));
        return copy(keys, next).checkDistinct();
    }

    /**
     * The columns that hold the token ({@code bigint}) and owner ({@code text}). Defaults
     * {@code fencing_token} and {@code fencing_owner}.
     *
     * @param tokenColumn the token column
     * @param ownerColumn the owner column
     * @return a new spec
     */
    public FencedWrite fencingColumns(String tokenColumn, String ownerColumn) {
        return new FencedWrite(table, keys, values, Identifiers.column(tokenColumn, "token column"),
                Identifiers.column(ownerColumn, "owner column"), rule, observations, guard, leaseCheck).checkDistinct();
    }

    /**
     * The table carries the token column alone ({@code bigint}; the classic {@code last_fencing_token}), with no
     * owner column: the write then uses {@link FencingRule#STRICTLY_NEWER}, {@code WHERE token IS NULL OR token <
     * ?}, which is all a token alone can decide. What the owner column adds: a retried write of the same lease is
     * accepted again (idempotent), one lease may write the row several times, and a token that the lock service
     * re-issues to another owner after losing data cannot let both owners write. Without it, a stored token equal
     * to the lease's is rejected whoever wrote it, and the lease is not told (the rejection may be its own).
     *
     * @param tokenColumn the token column
     * @return a new spec
     */
    public FencedWrite fencingColumn(String tokenColumn) {
        return new FencedWrite(table, keys, values, Identifiers.column(tokenColumn, "token column"), null,
                FencingRule.STRICTLY_NEWER, observations, guard, leaseCheck).checkDistinct();
    }

    /**
     * The rule that decides which tokens are accepted. Default {@link FencingRule#SAME_LEASE_OR_NEWER}; a spec with
     * the token column alone ({@link #fencingColumn(String)}) accepts only {@link FencingRule#STRICTLY_NEWER}.
     *
     * @param rule the rule
     * @return a new spec
     * @throws IllegalArgumentException for {@code SAME_LEASE_OR_NEWER} without an owner column
     */
    public FencedWrite rule(FencingRule rule) {
        Objects.requireNonNull(rule, "rule must not be null");
        if (ownerColumn == null && rule == FencingRule.SAME_LEASE_OR_NEWER) {
            throw new IllegalArgumentException("A fenced write of " + table + " with the token column " + tokenColumn
                    + " alone can only use FencingRule.STRICTLY_NEWER: SAME_LEASE_OR_NEWER needs an owner column "
                    + "(fencingColumns(token, owner))");
        }
        return new FencedWrite(table, keys, values, tokenColumn, ownerColumn, rule, observations, guard, leaseCheck);
    }

    /**
     * Names the lock that guards the rows this spec writes. The row's token column then only ever holds tokens
     * of that lock: a write inside nested {@code withLease} scopes takes the lease on this name from the Reactor
     * Context, and a write given the lease of another lock is refused with {@link IllegalArgumentException}
     * before any SQL is sent. Without a guard, a Context write takes the Context's only lease and fails with
     * {@link dev.fenced.lock.AmbiguousLeaseException} when there are several. Name the guard whenever a row may
     * be written from code that holds more than one lock.
     *
     * @param lockName the lock name, as given to {@code withLease}; the rule of lock names applies
     * @return a new spec
     * @throws IllegalArgumentException when the name is not a valid lock name (null, blank, over 1,024 characters,
     *     control characters or braces), with the message {@code acquire} gives for it
     */
    public FencedWrite guardedBy(String lockName) {
        return new FencedWrite(table, keys, values, tokenColumn, ownerColumn, rule, observations,
                Leases.requireGuard(lockName), leaseCheck);
    }

    /**
     * Checks the lease in the lease table of a lock client on PostgreSQL
     * ({@code FencedLockClient.builder().postgres(connectionFactory, leases)}) in the write's transaction, before the
     * write: the lock's row (keyed by the lease's {@linkplain FencedLease#lockId() lock id}) must hold the lease's
     * {@linkplain FencedLease#ownerId() owner} and token and be unexpired by the database's clock, and it stays locked
     * ({@code FOR KEY SHARE}) until the transaction ends, so no other owner can be granted the lock before the
     * write commits. The holder's renewals and release do not wait for that lock. Without this, the fence alone
     * keeps the data safe: a stale write is refused once a newer holder has written; with it, a write is also
     * refused when the lease expired in the database or was granted to another owner who has not written yet.
     *
     * <p>A refusal fails with {@link LeaseCheckFailedException} before anything is written. The check needs a
     * transaction on PostgreSQL, with the lease table in the write's database: on a {@code ConnectionFactory} the
     * write joins the subscriber's Spring transaction (through wrapping factories too) or the transaction of the
     * connection the factory hands out, or else runs in a transaction of its own (begun, checked,
     * written, committed; rolled back on any error or cancellation); on a {@code Connection} it runs in the
     * connection's transaction, and a connection in auto-commit mode is refused with {@link IllegalStateException}
     * before any SQL. On MariaDB/MySQL every write of this spec fails with {@link IllegalStateException} before any
     * statement of the write (a transaction of its own is begun and rolled back). Check first in the transaction:
     * under {@code REPEATABLE READ} or {@code SERIALIZABLE} the check reads the transaction's snapshot, and a grant to another owner committed after it makes the check fail with
     * {@link FencedWriteConflictException} (the database's SQLSTATE {@code 40001}; retry the transaction).
     *
     * <p>The trade-off: while the write's transaction is open, the next acquirer of the lock waits (its acquire
     * statement blocks on the row), and fails with {@code LockServiceException} if that outlasts its command
     * timeout. Keep such transactions short.
     *
     * @param leases the lease table of the lock client that granted the leases
     * @return a new spec
     */
    public FencedWrite checkLease(dev.fenced.lock.PostgresLeaseTable leases) {
        return new FencedWrite(table, keys, values, tokenColumn, ownerColumn, rule, observations, guard, LeaseCheck.of(leases));
    }

    /**
     * Runs the guarded updates of many rows, each with its own lease, as one statement where the database allows:
     * on PostgreSQL one {@code UPDATE … FROM (VALUES …) … RETURNING}, which checks each row against its own item's
     * token and owner with this spec's rule and reports the rows it wrote; on MariaDB/MySQL, whose {@code UPDATE}
     * has no {@code RETURNING}, one guarded {@code UPDATE} per item, one after the other on the connection (the
     * single-row write's statements exactly). Each item is decided as {@link #update(Connection, FencedLease)}
     * decides one row: on PostgreSQL the items the statement did not write are read with one locking read of their
     * rows, and at {@code READ COMMITTED} a row whose token the rule refuses is that item's refusal; every other one
     * (missing row, a row the rule accepts, a snapshot isolation level) is explained by that item's own reads as the
     * single-row write explains it; so a refusal is the single-row write's error, and a stale item tells its lease
     * ({@link FencedLease#reportRejectedWrite}).
     * A refusal is reported for its item, never as an error of the batch: the other rows are written.
     *
     * <p>Every item's spec must have the same shape: the same table, key and value columns (in the same order),
     * fencing columns and rule; none may {@link #checkLease check the lease}. Two items of one key are refused (the
     * statement would write the row once, with either's values; numeric keys are compared by value, so
     * {@code BigDecimal} 1 and 1.0 are one key); a key that the database alone finds equal to another item's (a
     * case-insensitive collation, say) fails the batch with {@link IllegalArgumentException} after the statement,
     * instead of reporting as written an item whose values the row does not hold. The values of one column must be
     * of one Java class in every item ({@code Long} beside {@code Double} would make PostgreSQL's {@code VALUES}
     * convert both to one type, changing the stored value), and a column that is {@code NULL} in every item needs a
     * type other than {@code Object} ({@link #setNull(String, Class)}); both are checked on every dialect, so that a
     * batch valid on one database is valid on the other. A batch binds at most 65,535 values (PostgreSQL's limit):
     * items × (1 + key columns + value columns + fencing columns).
     *
     * <p>Runs in whatever transaction the connection has, which the caller owns. In auto-commit mode each statement
     * commits on its own, so an error of the batch (an SQL error of a later row, a conflict while explaining an
     * unwritten item) may come after rows were written and committed: on MariaDB/MySQL the items before the
     * failing one; on PostgreSQL every row of the multi-row statement, when an explanation fails after it. The
     * error does not say which; run the batch in a transaction (or use
     * {@link #updateAll(ConnectionFactory, List)}, which does) when an error must mean nothing was written.
     * Observations of the specs are not made for a batch. Cold: subscribing sends the statement.
     *
     * @param connection the connection
     * @param items the rows to write, each with its lease: at least one, at most 1,000
     * @return one outcome per item, in the order of {@code items}; fails with {@link IllegalArgumentException} before
     *     any SQL for items of different shapes, two items of one key, one column of different classes, a column
     *     {@code NULL} of type {@code Object} in every item, too many items or too many bound values, and with
     *     {@link FencedWriteConflictException} (and SQL errors) when the database could not run the statement
     */
    public static Mono<List<ItemOutcome>> updateAll(Connection connection, List<Item> items) {
        return MultiRowUpdate.run(connection, items);
    }

    /**
     * As {@link #updateAll(Connection, List)}, in one transaction on a connection of {@code connectionFactory}: the
     * subscriber's Spring transaction on that factory when there is one (whose owner commits, or rolls back on the
     * batch's error), else a transaction of its own on a new connection, begun before the first statement, committed
     * when every item is decided and rolled back on error or cancellation, so that an error of the batch means none
     * of its rows was written. Refused items do not roll the batch back: they are outcomes, not errors.
     *
     * @param connectionFactory the connection factory, pooled or not
     * @param items the rows to write, each with its lease
     * @return one outcome per item, in the order of {@code items}
     */
    public static Mono<List<ItemOutcome>> updateAll(ConnectionFactory connectionFactory, List<Item> items) {
        return Connections.inTransaction(connectionFactory, c -> updateAll(c, items)).singleOrEmpty();
    }

    /**
     * One row of {@link #updateAll}: the spec of its write (key and values) and the lease whose token it carries.
     *
     * @param write the row's write
     * @param lease the row's lease
     */
    public record Item(FencedWrite write, FencedLease lease) {

        /**
         * @param write the row's write
         * @param lease the row's lease
         */
        public Item {
            Objects.requireNonNull(write, "write must not be null");
            Objects.requireNonNull(lease, "lease must not be null");
        }
    }

    /**
     * What {@link #updateAll} did with one item.
     *
     * @param item the item
     * @param rowsUpdated the rows written, 0 when refused
     * @param refusal why the row was not written: {@link dev.fenced.lock.StaleFencingTokenException} (storage holds a
     *     newer token, or the same token of another owner), {@link FencedRowNotFoundException}, or
     *     {@link LeaseNotHeldException} (the lease was not held, nothing was sent for it); {@code null} when written
     */
    public record ItemOutcome(Item item, long rowsUpdated, @Nullable RuntimeException refusal) {

        /**
         * Whether the row was written.
         *
         * @return whether it was
         */
        public boolean written() {
            return refusal == null;
        }
    }

    /** What the multi-row update needs of one spec: its table, columns and rule. */
    String table() {
        return table;
    }

    List<String> keyColumns() {
        return keys.stream().map(Column::name).toList();
    }

    List<String> valueColumns() {
        return values.stream().map(Column::name).toList();
    }

    String tokenColumn() {
        return tokenColumn;
    }

    @Nullable String ownerColumn() {
        return ownerColumn;
    }

    FencingRule rule() {
        return rule;
    }

    boolean checksLease() {
        return leaseCheck != null;
    }

    /** The values of one row of the multi-row update: its keys, its set values, the token and (if stored) the owner. */
    List<Sql.Param> rowParams(FencedLease lease) {
        return insertParams(lease);
    }

    /** The key values, to tell two items of one row apart: numbers of one class by value ({@code BigDecimal} 1 = 1.0). */
    List<@Nullable Object> keyValues() {
        return keys.stream().map(c -> c.value() instanceof java.math.BigDecimal d ? d.stripTrailingZeros() : c.value())
                .toList();
    }

    /** The key then the value columns, by name, in the order of {@link #columnParams()}. */
    List<String> columnNames() {
        List<String> names = new ArrayList<>(keys.size() + values.size());
        keys.forEach(c -> names.add(c.name()));
        values.forEach(c -> names.add(c.name()));
        return names;
    }

    /** What the key then the value columns bind. */
    List<Sql.Param> columnParams() {
        List<Sql.Param> params = new ArrayList<>(keys.size() + values.size());
        keys.forEach(c -> params.add(c.param()));
        values.forEach(c -> params.add(c.param()));
        return params;
    }

    /**
     * Why the multi-row update did not write this row, decided as the single-row write decides: the row's reads,
     * and this row's guarded statement once more if the row changed in between. Completes with the rows written
     * when the explanation finds it written after all.
     */
    Mono<Long> explainUnwritten(Connection connection, SqlDialect dialect, FencedLease lease) {
        return explainRejection(connection, dialect, lease, guardedUpdate(connection, dialect, lease), false, true)
                .onErrorMap(e -> SqlErrors.conflict(e, lease.name(), target()));
    }

    /** The key values, bound as the single-row write binds them. */
    List<Sql.Param> keyParamsOfRow() {
        return keyParams();
    }

    /**
     * The refusal of this row that a locking read at {@code READ COMMITTED} showed holding {@code token} and
     * {@code owner}, as the single-row write's explanation decides it (the lease is told), or {@code null} when the
     * rule accepts them or no token is stored: then only this row's own explanation decides.
     */
    @Nullable RuntimeException refusalOf(@Nullable Long token, @Nullable String owner, FencedLease lease) {
        if (token == null || rule.accepts(token, owner, lease.token(), lease.ownerId())) {
            return null;
        }
        return (RuntimeException) rejection(lease, new Statements.Stored(token, owner, null));
    }

    /** The checks the single-row write makes before any SQL: a lease that is not held, or of another lock. */
    @Nullable RuntimeException problemBeforeSql(FencedLease lease) {
        LeaseNotHeldException notHeld = Leases.notHeld(lease);
        if (notHeld != null) {
            return notHeld;
        }
        return Leases.wrongLock(lease, guard, description());
    }

    String schemaDescriptionFor(SqlDialect dialect) {
        return schemaDescription(dialect);
    }

    /**
     * Runs the guarded update on {@code connection}, in whatever transaction it has (with {@link #checkLease}, it
     * must have one).
     *
     * @param connection the connection
     * @param lease the lease whose token the write carries
     * @return the number of rows updated, at least 1
     */
    public Mono<Long> update(Connection connection, FencedLease lease) {
        return run(connection, lease, Kind.UPDATE);
    }

    /**
     * Runs the guarded update on a connection of {@code connectionFactory}: the connection of the subscriber's
     * Spring transaction on that factory when there is one ({@code TransactionalOperator}, {@code @Transactional};
     * needs {@code spring-r2dbc} on the class path), so that the write commits or rolls back with it; else a new
     * connection in auto-commit mode, closed afterwards, on which the write commits on its own (with
     * {@link #checkLease}, or when the connection has auto-commit off and no transaction open, a transaction of its
     * own on the new connection).
     *
     * @param connectionFactory the connection factory, pooled or not
     * @param lease the lease whose token the write carries
     * @return the number of rows updated, at least 1
     */
    public Mono<Long> update(ConnectionFactory connectionFactory, FencedLease lease) {
        return onConnection(connectionFactory, c -> update(c, lease));
    }

    /**
     * Runs the guarded update with the lease of the enclosing {@code FencedLockClient.withLease} scope, found
     * in the Reactor Context: the lease on the {@linkplain #guardedBy(String) guarding lock}, or, when none is
     * named, the Context's only lease. Joins the subscriber's transaction as
     * {@link #update(ConnectionFactory, FencedLease)} does.
     *
     * @param connectionFactory the connection factory
     * @return the number of rows updated; fails before any SQL with {@link IllegalStateException} when the
     *     Context holds no such lease, and with {@link dev.fenced.lock.AmbiguousLeaseException} when it holds
     *     several and no guard is named
     */
    public Mono<Long> update(ConnectionFactory connectionFactory) {
        return Leases.fromContext(guard, description()).flatMap(lease -> update(connectionFactory, lease));
    }

    /**
     * Runs the guarded upsert on {@code connection}: inserts the row, or updates it if the key exists and the
     * rule accepts the token. On PostgreSQL one {@code INSERT … ON CONFLICT … DO UPDATE … WHERE <rule>}; on
     * MariaDB/MySQL the guarded update, then an insert when no row exists (and the guarded update again when
     * another writer inserted it in between): run it in a transaction where the two must not be told apart.
     *
     * @param connection the connection
     * @param lease the lease whose token the write carries
     * @return the number of rows inserted or updated (1)
     */
    public Mono<Long> upsert(Connection connection, FencedLease lease) {
        return run(connection, lease, Kind.UPSERT);
    }

    /**
     * Runs the guarded upsert on a connection of {@code connectionFactory}, joining the subscriber's transaction
     * as {@link #update(ConnectionFactory, FencedLease)} does.
     *
     * @param connectionFactory the connection factory
     * @param lease the lease whose token the write carries
     * @return the number of rows inserted or updated (1)
     */
    public Mono<Long> upsert(ConnectionFactory connectionFactory, FencedLease lease) {
        return onConnection(connectionFactory, c -> upsert(c, lease));
    }

    /**
     * Runs the guarded upsert with the lease of the enclosing {@code withLease} scope, chosen as
     * {@link #update(ConnectionFactory)} chooses it.
     *
     * @param connectionFactory the connection factory
     * @return the number of rows inserted or updated (1); the same errors as {@link #update(ConnectionFactory)}
     */
    public Mono<Long> upsert(ConnectionFactory connectionFactory) {
        return Leases.fromContext(guard, description()).flatMap(lease -> upsert(connectionFactory, lease));
    }

    /**
     * The claim step of a read-modify-write, in one call: writes the lease's token into the row (with this spec's
     * {@code set} values, if any) under the rule, then reads the row as it now is. Once the claim is in, a holder
     * with an older token can no longer write the row, so what the caller computes from the row it read cannot
     * be overwritten by a stale holder that read before it, nor based on a read that such a holder then changes.
     * Write the result with a {@code FencedWrite} of the same lease: under the default rule the same lease may
     * write again. In a transaction the claimed row also stays locked until the transaction ends; there plain
     * statements may follow, which is how a table with the token column alone ({@link FencingRule#STRICTLY_NEWER},
     * one write per token) does its read-modify-write. The row is read with a locking read
     * ({@code FOR KEY SHARE} / {@code FOR UPDATE}), so it is the row as it is now, never the transaction's snapshot.
     *
     * @param connection the connection
     * @param lease the lease whose token claims the row
     * @param mapper maps the row read after the claim (all its columns)
     * @param <T> the type of the mapped row
     * @return the row as claimed; the errors of {@link #update(Connection, FencedLease)} when the claim is refused
     *     or the row does not exist, and nothing is read then
     */
    public <T> Mono<T> claim(Connection connection, FencedLease lease, Function<? super Readable, ? extends T> mapper) {
        Objects.requireNonNull(mapper, "mapper must not be null");
        return update(connection, lease).then(Mono.defer(() -> {
            Sql select = selectRowSql(SqlDialect.of(connection));
            return Flux.from(select.bind(connection.createStatement(select.text()), keyParams()).execute())
                    .flatMap(result -> result.map(mapper))
                    .next();
        }));
    }

    /**
     * The claim step ({@link #claim(Connection, FencedLease, Function)}) on a connection of
     * {@code connectionFactory}, joining the subscriber's transaction as {@link #update(ConnectionFactory,
     * FencedLease)} does; outside one the claim commits at once.
     *
     * @param connectionFactory the connection factory
     * @param lease the lease whose token claims the row
     * @param mapper maps the row read after the claim
     * @param <T> the type of the mapped row
     * @return the row as claimed
     */
    public <T> Mono<T> claim(ConnectionFactory connectionFactory, FencedLease lease,
            Function<? super Readable, ? extends T> mapper) {
        return onConnection(connectionFactory, c -> claim(c, lease, mapper));
    }

    /**
     * Where a write on a factory runs: joining the subscriber's transaction, else on a connection of its own, in
     * auto-commit mode, or, with a lease check, which needs one, in a transaction of its own.
     */
    private <T> Mono<T> onConnection(ConnectionFactory connectionFactory, Function<Connection, Mono<T>> work) {
        return leaseCheck == null ? Connections.withOne(connectionFactory, work)
                : Connections.inTransaction(connectionFactory, work).singleOrEmpty();
    }

    private enum Kind { UPDATE, UPSERT }

    private Mono<Long> run(Connection connection, FencedLease lease, Kind kind) {
        Mono<Long> write = unobserved(connection, lease, kind);
        return observations == null ? write : WriteObservation.observe(write, observations, table, lease.name());
    }

    private Mono<Long> unobserved(Connection connection, FencedLease lease, Kind kind) {
        return Mono.defer(() -> {
            Objects.requireNonNull(connection, "connection must not be null");
            LeaseNotHeldException notHeld = Leases.notHeld(lease);
            if (notHeld != null) {
                return Mono.error(notHeld);
            }
            IllegalArgumentException wrongLock = Leases.wrongLock(lease, guard, description());
            if (wrongLock != null) {
                return Mono.error(wrongLock);
            }
            if (keys.isEmpty()) {
                return Mono.error(new IllegalStateException("A fenced write of " + table + " needs at least one key(...)"));
            }
            SqlDialect dialect = SqlDialect.of(connection);
            Mono<Long> write = write(connection, dialect, lease, kind);
            return (leaseCheck == null ? write : leaseCheck.verify(connection, lease, description()).then(write))
                    .onErrorMap(e -> SqlErrors.conflict(e, lease.name(), target()));
        });
    }

    private Mono<Long> write(Connection connection, SqlDialect dialect, FencedLease lease, Kind kind) {
        return Mono.defer(() -> {
            if (kind == Kind.UPDATE) {
                return guardedUpdate(connection, dialect, lease);
            }
            if (dialect.atomicUpsert()) {
                Sql upsert = upsertSql(dialect);
                return guarded(connection, dialect, lease, upsert, insertParams(lease), true, true);
            }
            // Update, else insert, else (another writer inserted it meanwhile) update: each step guarded or keyed.
            return guardedUpdate(connection, dialect, lease)
                    .onErrorResume(FencedRowNotFoundException.class, missing -> insert(connection, dialect, lease)
                            .onErrorResume(SqlErrors::isDuplicateKey, raced -> guardedUpdate(connection, dialect, lease)));
        });
    }

    private Mono<Long> guardedUpdate(Connection connection, SqlDialect dialect, FencedLease lease) {
        return guarded(connection, dialect, lease, updateSql(dialect), updateParams(lease), true, false);
    }

    /**
     * Runs a guarded statement, which alone decides acceptance; when it writes nothing, explains why, and decides
     * once more with the statement if the row changed in between ({@code again}). {@code locksLatest}: the statement
     * judges the latest version of the row even under a snapshot (PostgreSQL's guarded upsert, which fails with
     * {@code 40001} when the row changed after the snapshot), so a token its explanation reads is the stored one.
     */
    private Mono<Long> guarded(Connection connection, SqlDialect dialect, FencedLease lease, Sql sql, List<Sql.Param> params,
            boolean again, boolean locksLatest) {
        return Mono.defer(() -> Statements.rowsUpdated(sql.bind(connection.createStatement(sql.text()), params),
                        schemaDescription(dialect)))
                .flatMap(rows -> rows > 0 ? Mono.just(rows) : explainRejection(connection, dialect, lease,
                        again ? guarded(connection, dialect, lease, sql, params, false, locksLatest) : null, locksLatest,
                        false));
    }

    private Mono<Long> insert(Connection connection, SqlDialect dialect, FencedLease lease) {
        Sql insert = insertSql(dialect);
        return Flux.from(insert.bind(connection.createStatement(insert.text()), insertParams(lease)).execute())
                .flatMap(io.r2dbc.spi.Result::getRowsUpdated)
                .reduce(0L, Long::sum);
    }

    /**
     * Nothing was written: read what the row holds to tell "stale" from "no such row". On PostgreSQL with the locking
     * read {@code FOR KEY SHARE} alone, which does not make another transaction's {@code UPDATE} wait; at
     * {@code REPEATABLE READ} and {@code SERIALIZABLE} it may return the snapshot's version, so a token it shows that
     * the rule refuses is checked with {@link #latestUnderSnapshot}: stored, or the row changed since the snapshot
     * ({@link FencedWriteConflictException#refusedUnderSnapshot}) ({@link SqlDialect#explainsWithPlainReadFirst}). On MariaDB first with a plain read, which
     * takes no lock: a token there that the rule refuses explains the refusal (the guarded statement decided; the row
     * as committed now holds that token or a newer one), and a refused writer then holds no lock on the row, so the
     * valid holder's next write does not wait for the refused writer's transaction to end. Only when the plain read
     * contradicts the refusal (no row, or a row the rule accepts: it may be the transaction's snapshot instead of the
     * row the guarded statement judged, under InnoDB's {@code REPEATABLE READ}) is the row read again with a locking
     * read ({@link SqlDialect#lockingRead}), which sees the latest committed version.
     *
     * @param again the guarded statement, to decide once more when the row now holds what the rule accepts (it
     *     changed after the statement); {@code null} when that was the second time
     * @param locksLatest whether the statement judged the latest version of the row (PostgreSQL's guarded upsert)
     * @param ofBatch whether the statement was {@link #updateAll}'s, which counts the rows it matched: a row that now
     *     holds this lease's token was written by another item of the batch, not found holding these very values
     */
    private Mono<Long> explainRejection(Connection connection, SqlDialect dialect, FencedLease lease, @Nullable Mono<Long> again,
            boolean locksLatest, boolean ofBatch) {
        if (!dialect.explainsWithPlainReadFirst()) {
            return explainWithLockingRead(connection, dialect, lease, again, !locksLatest, ofBatch);
        }
        Sql plain = selectStoredSql(dialect, false);
        return Statements.stored(plain.bind(connection.createStatement(plain.text()), keyParams()), schemaDescription(dialect))
                .filter(stored -> stored.token() != null
                        && !rule.accepts(stored.token(), stored.owner(), lease.token(), lease.ownerId()))
                .flatMap(stored -> Mono.<Long>error(rejection(lease, stored)))
                .switchIfEmpty(Mono.defer(() -> explainWithLockingRead(connection, dialect, lease, again, false, ofBatch)));
    }

    private Throwable rejection(FencedLease lease, Statements.Stored stored) {
        long token = Objects.requireNonNull(stored.token());
        return ownerColumn == null ? Leases.rejectedByToken(lease, target(), token)
                : Leases.rejected(lease, target(), token, stored.owner());
    }

    /** {@link #explainRejection}, once the plain read contradicted the refusal: the row as committed now decides. */
    private Mono<Long> explainWithLockingRead(Connection connection, SqlDialect dialect, FencedLease lease,
            @Nullable Mono<Long> again, boolean mayReadSnapshot, boolean ofBatch) {
        Sql select = selectStoredSql(dialect, true);
        return Statements.stored(select.bind(connection.createStatement(select.text()), keyParams()), schemaDescription(dialect))
                .flatMap(stored -> {
                    Long token = stored.token();
                    if (ofBatch && token != null && token == lease.token()
                            && rule.accepts(token, stored.owner(), lease.token(), lease.ownerId())) {
                        // The batch's statement reports each row it matched, and did not report this item, yet the row
                        // holds its token: another item named this row under a key the database finds equal.
                        return Mono.<Long>error(new IllegalArgumentException("An item of a multi-row fenced write of "
                                + target() + " was not written by the statement, yet the row holds its token " + token
                                + ": another item names the same row under a key the database finds equal; write each "
                                + "row once"));
                    }
                    if (token != null && token == lease.token() && rule == FencingRule.SAME_LEASE_OR_NEWER
                            && lease.ownerId().equals(stored.owner())) {
                        // Accepted, but the row held these very values: a driver that counts changed rows (not
                        // matched ones) reports none.
                        return Mono.just(1L);
                    }
                    if (token == null || rule.accepts(token, stored.owner(), lease.token(), lease.ownerId())) {
                        // The row changed between the statement and this read, which holds it now (in a transaction):
                        // the guarded statement decides again.
                        return again != null ? again
                                : Mono.<Long>error(FencedWriteConflictException.changedDuringWrite(lease.name(), target()));
                    }
                    // PostgreSQL's FOR KEY SHARE returns the snapshot's version of a row changed (keys kept) since
                    // the snapshot, without a serialization failure: at REPEATABLE READ or SERIALIZABLE the token read
                    // may be older than the one stored. FOR SHARE tells (40001 when the row changed since), inside a
                    // savepoint rolled back at once, which releases its lock.
                    return !mayReadSnapshot ? Mono.<Long>error(rejection(lease, stored))
                            : dialect.snapshotIsolation(connection)
                                    .flatMap(level -> latestUnderSnapshot(connection, dialect)
                                            .defaultIfEmpty(stored)
                                            .onErrorMap(e -> "40001".equals(SqlErrors.conflictState(e)),
                                                    e -> FencedWriteConflictException.refusedUnderSnapshot(lease.name(),
                                                            target(), level))
                                            .flatMap(latest -> Mono.<Long>error(rejection(lease, latest))))
                                    .switchIfEmpty(Mono.error(() -> rejection(lease, stored)));
                })
                .switchIfEmpty(Mono.defer(() -> dialect.snapshotIsolation(connection)
                        .flatMap(level -> Mono.<Long>error(FencedRowNotFoundException.invisibleToSnapshot(lease.name(), target(), level)))
                        .switchIfEmpty(Mono.error(() -> FencedRowNotFoundException.of(lease.name(), target())))));
    }

    /**
     * The row read with {@code FOR SHARE} inside a savepoint that is rolled back at once (PostgreSQL, at
     * {@code REPEATABLE READ} or {@code SERIALIZABLE}): it fails to serialize ({@code 40001}) when the row changed
     * after the transaction's snapshot, else it is the latest committed version. Rolling back to the savepoint
     * releases the lock (and the error), so the valid holder's next write does not wait for this transaction; this
     * read may wait for a valid holder's open write of the row.
     */
    private Mono<Statements.Stored> latestUnderSnapshot(Connection connection, SqlDialect dialect) {
        Sql select = SqlCache.get(shape("STORED-SHARE", dialect), () -> {
            Sql.Builder sql = new Sql.Builder(dialect).append("SELECT ").id(tokenColumn);
            if (ownerColumn != null) {
                sql.append(", ").id(ownerColumn);
            }
            return keyCondition(sql.append(" FROM ").id(table).append(" WHERE "), 0).append(" FOR SHARE").build();
        });
        Mono<Void> rollBack = Mono.defer(() -> Statements.rowsUpdated(
                connection.createStatement("ROLLBACK TO SAVEPOINT fenced_explain"), schemaDescription(dialect)).then());
        return Statements.rowsUpdated(connection.createStatement("SAVEPOINT fenced_explain"), schemaDescription(dialect))
                .then(Statements.stored(select.bind(connection.createStatement(select.text()), keyParams()),
                        schemaDescription(dialect)))
                .flatMap(latest -> rollBack.thenReturn(latest))
                .switchIfEmpty(rollBack.then(Mono.empty()))
                .onErrorResume(e -> rollBack.then(Mono.error(e)));
    }

    /** The values of an update: the set values, the keys, the token and (if stored) the owner. */
    private List<Sql.Param> updateParams(FencedLease lease) {
        List<Sql.Param> params = new ArrayList<>(values.size() + keys.size() + 2);
        values.forEach(c -> params.add(c.param()));
        keys.forEach(c -> params.add(c.param()));
        addFencing(params, lease);
        return params;
    }

    /** The values of an insert or upsert: the keys, the set values, the token and (if stored) the owner. */
    private List<Sql.Param> insertParams(FencedLease lease) {
        List<Sql.Param> params = new ArrayList<>(values.size() + keys.size() + 2);
        keys.forEach(c -> params.add(c.param()));
        values.forEach(c -> params.add(c.param()));
        addFencing(params, lease);
        return params;
    }

    private void addFencing(List<Sql.Param> params, FencedLease lease) {
        params.add(Sql.Param.of(lease.token()));
        if (ownerColumn != null) {
            params.add(Sql.Param.of(lease.ownerId()));
        }
    }

    private List<Sql.Param> keyParams() {
        List<Sql.Param> params = new ArrayList<>(keys.size());
        keys.forEach(c -> params.add(c.param()));
        return params;
    }

    Sql updateSql(SqlDialect dialect) {
        return SqlCache.get(shape("UPDATE", dialect), () -> buildUpdateSql(dialect));
    }

    Sql upsertSql(SqlDialect dialect) {
        return SqlCache.get(shape("UPSERT", dialect), () -> buildUpsertSql(dialect));
    }

    Sql insertSql(SqlDialect dialect) {
        return SqlCache.get(shape("INSERT", dialect), () -> buildInsert(new Sql.Builder(dialect)).build());
    }

    private Sql selectStoredSql(SqlDialect dialect, boolean locking) {
        return SqlCache.get(shape(locking ? "STORED-LOCKING" : "STORED", dialect), () -> {
            Sql.Builder sql = new Sql.Builder(dialect).append("SELECT ").id(tokenColumn);
            if (ownerColumn != null) {
                sql.append(", ").id(ownerColumn);
            }
            keyCondition(sql.append(" FROM ").id(table).append(" WHERE "), 0);
            return (locking ? sql.append(dialect.lockingRead()) : sql).build();
        });
    }

    /**
     * The claim's read of the row, a locking read: after a claim that changed nothing (the row held these very values)
     * a plain read under InnoDB's {@code REPEATABLE READ} would return the transaction's snapshot, not the row as it is
     * now. The claim already holds the row (its guarded statement locked it), so the read waits for no one.
     */
    private Sql selectRowSql(SqlDialect dialect) {
        return SqlCache.get(shape("ROW", dialect),
                () -> keyCondition(new Sql.Builder(dialect).append("SELECT * FROM ").id(table).append(" WHERE "), 0)
                        .append(dialect.lockingRead()).build());
    }

    /**
     * Whether {@code other}'s SQL of any kind is this spec's: the same table, key and value columns in order, fencing
     * columns and rule, what {@link #shape} names besides the kind and dialect, compared without building text (a
     * batch compares every item's spec with the first's).
     */
    boolean sameShape(FencedWrite other) {
        return table.equals(other.table) && tokenColumn.equals(other.tokenColumn)
                && Objects.equals(ownerColumn, other.ownerColumn) && rule == other.rule
                && sameNames(keys, other.keys) && sameNames(values, other.values);
    }

    private static boolean sameNames(List<Column> a, List<Column> b) {
        if (a.size() != b.size()) {
            return false;
        }
        for (int i = 0; i < a.size(); i++) {
            if (!a.get(i).name().equals(b.get(i).name())) {
                return false;
            }
        }
        return true;
    }

    /** Whether the spec names at least one key column. */
    boolean hasKeys() {
        return !keys.isEmpty();
    }

    /** What the SQL depends on: the statement kind, the dialect, the table, the columns in order, and the rule. */
    String shape(String kind, SqlDialect dialect) {
        StringBuilder b = new StringBuilder(kind).append('\u0000').append(dialect.name()).append('\u0000').append(table)
                .append('\u0000');
        for (Column c : keys) {
            b.append(c.name()).append(',');
        }
        b.append('\u0000');
        for (Column c : values) {
            b.append(c.name()).append(',');
        }
        return b.append('\u0000').append(tokenColumn).append('\u0000').append(ownerColumn).append('\u0000').append(rule.name())
                .toString();
    }

    private Sql buildUpdateSql(SqlDialect dialect) {
        Sql.Builder sql = new Sql.Builder(dialect).append("UPDATE ").id(table).append(" SET ");
        int index = 0;
        for (Column c : values) {
            sql.id(c.name()).append(" = ").param(index++).append(", ");
        }
        int token = index + keys.size();
        int owner = token + 1;
        sql.id(tokenColumn).append(" = ").param(token);
        if (ownerColumn != null) {
            sql.append(", ").id(ownerColumn).append(" = ").param(owner);
        }
        keyCondition(sql.append(" WHERE "), index).append(" AND ");
        rule.appendCondition(sql, column(dialect, tokenColumn), ownerColumn == null ? null : column(dialect, ownerColumn),
                Sql.Operand.value(token), ownerColumn == null ? null : Sql.Operand.value(owner));
        return sql.build();
    }

    /** {@code INSERT INTO t (keys, values, token[, owner]) VALUES (…)}, the values in {@link #insertParams} order. */
    private Sql.Builder buildInsert(Sql.Builder sql) {
        sql.append("INSERT INTO ").id(table).append(" (");
        for (Column c : keys) {
            sql.id(c.name()).append(", ");
        }
        for (Column c : values) {
            sql.id(c.name()).append(", ");
        }
        sql.id(tokenColumn);
        if (ownerColumn != null) {
            sql.append(", ").id(ownerColumn);
        }
        sql.append(") VALUES (");
        int count = keys.size() + values.size() + (ownerColumn == null ? 1 : 2);
        for (int i = 0; i < count; i++) {
            sql.append(i == 0 ? "" : ", ").param(i);
        }
        return sql.append(")");
    }

    /** PostgreSQL's one-statement guarded upsert. */
    private Sql buildUpsertSql(SqlDialect dialect) {
        Sql.Builder sql = buildInsert(new Sql.Builder(dialect)).append(" ON CONFLICT (");
        for (int i = 0; i < keys.size(); i++) {
            sql.append(i == 0 ? "" : ", ").id(keys.get(i).name());
        }
        sql.append(") DO UPDATE SET ");
        for (Column c : values) {
            sql.id(c.name()).append(" = EXCLUDED.").id(c.name()).append(", ");
        }
        sql.id(tokenColumn).append(" = EXCLUDED.").id(tokenColumn);
        if (ownerColumn != null) {
            sql.append(", ").id(ownerColumn).append(" = EXCLUDED.").id(ownerColumn);
        }
        sql.append(" WHERE ");
        String quotedTable = dialect.quote(table) + ".";
        rule.appendCondition(sql, Sql.Operand.sql(quotedTable + dialect.quote(tokenColumn)),
                ownerColumn == null ? null : Sql.Operand.sql(quotedTable + dialect.quote(ownerColumn)),
                Sql.Operand.sql("EXCLUDED." + dialect.quote(tokenColumn)),
                ownerColumn == null ? null : Sql.Operand.sql("EXCLUDED." + dialect.quote(ownerColumn)));
        return sql.build();
    }

    private static Sql.Operand column(SqlDialect dialect, String name) {
        return Sql.Operand.sql(dialect.quote(name));
    }

    private Sql.Builder keyCondition(Sql.Builder sql, int firstIndex) {
        int index = firstIndex;
        for (Column c : keys) {
            sql.append(index == firstIndex ? "" : " AND ").id(c.name()).append(" = ").param(index++);
        }
        return sql;
    }

    private String target() {
        StringJoiner key = new StringJoiner(", ", table + " (", ")");
        for (Column c : keys) {
            key.add(c.name() + " = " + c.value());
        }
        return key.toString();
    }

    /** The write, as the start of an error message. */
    private String description() {
        return "A fenced write of " + table;
    }

    private String schemaDescription(SqlDialect dialect) {
        return "table " + dialect.quote(table) + " with key, value, token " + dialect.quote(tokenColumn) + " (bigint)"
                + (ownerColumn == null ? "" : " and owner " + dialect.quote(ownerColumn) + " (text)") + " columns";
    }

    private FencedWrite copy(List<Column> newKeys, List<Column> newValues) {
        return new FencedWrite(table, newKeys, newValues, tokenColumn, ownerColumn, rule, observations, guard, leaseCheck);
    }

    /**
     * Makes every write of this spec a Micrometer observation {@code fenced.write} (low-cardinality keys
     * {@code fenced.table} and {@code outcome}: written, stale, not_found, conflict ({@link FencedWriteConflictException}), error; the lock name as the
     * high-cardinality key {@code fenced.lock.name}), so traces show fenced writes. Needs
     * {@code io.micrometer:micrometer-observation} on the class path.
     *
     * @param registry the observation registry
     * @return a new spec
     */
    public FencedWrite observe(io.micrometer.observation.ObservationRegistry registry) {
        return new FencedWrite(table, keys, values, tokenColumn, ownerColumn, rule,
                Objects.requireNonNull(registry, "registry must not be null"), guard, leaseCheck);
    }

    private FencedWrite checkDistinct() {
        Set<String> seen = new HashSet<>();
        seen.add(tokenColumn);
        if (ownerColumn != null) {
            seen.add(ownerColumn);
        }
        for (Column c : keys) {
            if (!seen.add(c.name())) {
                throw new IllegalArgumentException("Column " + c.name() + " appears twice in the fenced write of " + table);
            }
        }
        for (Column c : values) {
            if (!seen.add(c.name())) {
                throw new IllegalArgumentException("Column " + c.name() + " appears twice in the fenced write of " + table
                        + " (the token and owner columns are set by the write itself)");
            }
        }
        return this;
    }

    @Override
    public String toString() {
        return "FencedWrite{" + target() + ", rule=" + rule + (guard == null ? "" : ", guardedBy=" + guard)
                + (leaseCheck == null ? "" : ", checkLease=" + leaseCheck.tableName()) + "}";
    }

    private record Column(String name, @Nullable Object value, @Nullable Class<?> nullType) {

        Sql.Param param() {
            return new Sql.Param(value, nullType);
        }
    }
}
