package dev.fenced.r2dbc;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedRowNotFoundException;
import dev.fenced.lock.LeaseNotHeldException;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Statement;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.StringJoiner;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * A token-guarded write of one row (or the rows matching a key) of a table that carries the fencing token
 * and owner in two columns (by default {@code fencing_token bigint} and {@code fencing_owner text}).
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
 * matches the key. {@link #upsert} runs {@code INSERT … ON CONFLICT (key) DO UPDATE … WHERE <rule>} for rows
 * that may not exist yet. A lease that is not held is refused with {@link LeaseNotHeldException} before any
 * SQL is sent. When storage holds a newer token, the lease is told
 * ({@link FencedLease#reportRejectedWrite}); inside {@code withLease} the work then fails with
 * {@link dev.fenced.lock.LeaseLostException} whose cause is the rejection.
 *
 * <p>Every {@code update}/{@code upsert} is cold: subscribing sends the statement (on a connection of the
 * factory, closed afterwards, or on the given connection, in its transaction). Cancelling after it was sent
 * does not recall it: in auto-commit mode it may still commit, and the token rule still guards it. Signals
 * arrive on the driver's I/O thread; do not block there. Immutable and thread-safe: each
 * {@code key}/{@code set}/… call returns a new instance, so one spec can be shared and extended.
 */
public final class FencedWrite {

    private final String table;
    private final String quotedTable;
    private final List<Column> keys;
    private final List<Column> values;
    private final String tokenColumn;
    private final String ownerColumn;
    private final FencingRule rule;
    private final @Nullable Object observations;
    private final @Nullable String guard;

    private FencedWrite(String table, String quotedTable, List<Column> keys, List<Column> values, String tokenColumn,
            String ownerColumn, FencingRule rule, @Nullable Object observations, @Nullable String guard) {
        this.observations = observations;
        this.guard = guard;
        this.table = table;
        this.quotedTable = quotedTable;
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
        return new FencedWrite(table, Identifiers.table(table, "table name"), List.of(), List.of(),
                Identifiers.column("fencing_token", "token column"), Identifiers.column("fencing_owner", "owner column"),
                FencingRule.SAME_LEASE_OR_NEWER, null, null);
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
        next.add(new Column(column, Identifiers.column(column, "key column"), value, null));
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
        next.add(new Column(column, Identifiers.column(column, "column"), value, null));
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
        next.add(new Column(column, Identifiers.column(column, "column"), null, type));
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
        return new FencedWrite(table, quotedTable, keys, values, Identifiers.column(tokenColumn, "token column"),
                Identifiers.column(ownerColumn, "owner column"), rule, observations, guard).checkDistinct();
    }

    /**
     * The rule that decides which tokens are accepted. Default {@link FencingRule#SAME_LEASE_OR_NEWER}.
     *
     * @param rule the rule
     * @return a new spec
     */
    public FencedWrite rule(FencingRule rule) {
        return new FencedWrite(table, quotedTable, keys, values, tokenColumn, ownerColumn,
                Objects.requireNonNull(rule, "rule must not be null"), observations, guard);
    }

    /**
     * Names the lock that guards the rows this spec writes. The row's token column then only ever holds tokens
     * of that lock: a write inside nested {@code withLease} scopes takes the lease on this name from the Reactor
     * Context, and a write given the lease of another lock is refused with {@link IllegalArgumentException}
     * before any SQL is sent. Without a guard, a Context write takes the Context's only lease and fails with
     * {@link dev.fenced.lock.AmbiguousLeaseException} when there are several. Name the guard whenever a row may
     * be written from code that holds more than one lock.
     *
     * @param lockName the lock name, as given to {@code withLease}
     * @return a new spec
     */
    public FencedWrite guardedBy(String lockName) {
        return new FencedWrite(table, quotedTable, keys, values, tokenColumn, ownerColumn, rule, observations,
                Leases.requireGuard(lockName));
    }

    /**
     * Runs the guarded update on {@code connection}, in whatever transaction it has.
     *
     * @param connection the connection
     * @param lease the lease whose token the write carries
     * @return the number of rows updated, at least 1
     */
    public Mono<Long> update(Connection connection, FencedLease lease) {
        return run(connection, lease, false);
    }

    /**
     * Runs the guarded update on a connection of {@code connectionFactory} (auto-commit), closed afterwards.
     *
     * @param connectionFactory the connection factory, pooled or not
     * @param lease the lease whose token the write carries
     * @return the number of rows updated, at least 1
     */
    public Mono<Long> update(ConnectionFactory connectionFactory, FencedLease lease) {
        return withConnection(connectionFactory, c -> update(c, lease));
    }

    /**
     * Runs the guarded update with the lease of the enclosing {@code FencedLockClient.withLease} scope, found
     * in the Reactor Context: the lease on the {@linkplain #guardedBy(String) guarding lock}, or, when none is
     * named, the Context's only lease.
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
     * rule accepts the token.
     *
     * @param connection the connection
     * @param lease the lease whose token the write carries
     * @return the number of rows inserted or updated (1)
     */
    public Mono<Long> upsert(Connection connection, FencedLease lease) {
        return run(connection, lease, true);
    }

    /**
     * Runs the guarded upsert on a connection of {@code connectionFactory} (auto-commit), closed afterwards.
     *
     * @param connectionFactory the connection factory
     * @param lease the lease whose token the write carries
     * @return the number of rows inserted or updated (1)
     */
    public Mono<Long> upsert(ConnectionFactory connectionFactory, FencedLease lease) {
        return withConnection(connectionFactory, c -> upsert(c, lease));
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

    private static Mono<Long> withConnection(ConnectionFactory connectionFactory,
            java.util.function.Function<Connection, Mono<Long>> work) {
        Objects.requireNonNull(connectionFactory, "connectionFactory must not be null");
        return Mono.usingWhen(connectionFactory.create(), work, Connection::close);
    }

    private Mono<Long> run(Connection connection, FencedLease lease, boolean upsert) {
        Mono<Long> write = unobserved(connection, lease, upsert);
        return observations == null ? write : WriteObservation.observe(write, observations, table, lease.name());
    }

    private Mono<Long> unobserved(Connection connection, FencedLease lease, boolean upsert) {
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
            Statement statement = connection.createStatement(upsert ? upsertSql() : updateSql());
            int index = bindAll(statement, upsert ? keys : values, 0);
            index = bindAll(statement, upsert ? values : keys, index);
            statement.bind(index, lease.token());
            statement.bind(index + 1, lease.ownerId());
            return Statements.rowsUpdated(statement, schemaDescription())
                    .flatMap(rows -> rows > 0 ? Mono.just(rows) : explainRejection(connection, lease));
        });
    }

    /** Nothing was written: read what the row holds to tell "stale" from "no such row". */
    private Mono<Long> explainRejection(Connection connection, FencedLease lease) {
        Statement select = connection.createStatement("SELECT " + tokenColumn + ", " + ownerColumn + " FROM " + quotedTable
                + " WHERE " + keyCondition(1));
        bindAll(select, keys, 0);
        return Statements.stored(select, schemaDescription())
                .flatMap(stored -> {
                    if (stored.token() == null || rule.accepts(stored.token(), stored.owner(), lease.token(), lease.ownerId())) {
                        // The row changed between the write and this read; the write itself found no row to take.
                        return Mono.<Long>error(FencedRowNotFoundException.of(lease.name(), target()));
                    }
                    return Mono.<Long>error(Leases.rejected(lease, target(), stored.token(), stored.owner()));
                })
                .switchIfEmpty(Mono.error(() -> FencedRowNotFoundException.of(lease.name(), target())));
    }

    String updateSql() {
        return SqlCache.get(shape("UPDATE"), this::buildUpdateSql);
    }

    String upsertSql() {
        return SqlCache.get(shape("UPSERT"), this::buildUpsertSql);
    }

    /** What the SQL text depends on: the statement kind, the table, the columns in order, and the rule. */
    private String shape(String kind) {
        StringBuilder b = new StringBuilder(kind).append('\u0000').append(quotedTable).append('\u0000');
        for (Column c : keys) {
            b.append(c.quoted()).append(',');
        }
        b.append('\u0000');
        for (Column c : values) {
            b.append(c.quoted()).append(',');
        }
        return b.append('\u0000').append(tokenColumn).append('\u0000').append(ownerColumn).append('\u0000').append(rule.name())
                .toString();
    }

    private String buildUpdateSql() {
        StringJoiner set = new StringJoiner(", ");
        int index = 1;
        for (Column c : values) {
            set.add(c.quoted() + " = $" + index++);
        }
        String where = keyCondition(index);
        index += keys.size();
        String token = "$" + index;
        String owner = "$" + (index + 1);
        set.add(tokenColumn + " = " + token);
        set.add(ownerColumn + " = " + owner);
        return "UPDATE " + quotedTable + " SET " + set + " WHERE " + where + " AND "
                + rule.condition(tokenColumn, ownerColumn, token, owner);
    }

    private String buildUpsertSql() {
        StringJoiner columns = new StringJoiner(", ");
        StringJoiner params = new StringJoiner(", ");
        StringJoiner conflict = new StringJoiner(", ");
        StringJoiner update = new StringJoiner(", ");
        int index = 1;
        for (Column c : keys) {
            columns.add(c.quoted());
            params.add("$" + index++);
            conflict.add(c.quoted());
        }
        for (Column c : values) {
            columns.add(c.quoted());
            params.add("$" + index++);
            update.add(c.quoted() + " = EXCLUDED." + c.quoted());
        }
        columns.add(tokenColumn).add(ownerColumn);
        params.add("$" + index).add("$" + (index + 1));
        update.add(tokenColumn + " = EXCLUDED." + tokenColumn).add(ownerColumn + " = EXCLUDED." + ownerColumn);
        return "INSERT INTO " + quotedTable + " (" + columns + ") VALUES (" + params + ") ON CONFLICT (" + conflict
                + ") DO UPDATE SET " + update + " WHERE " + rule.condition(quotedTable + "." + tokenColumn,
                quotedTable + "." + ownerColumn, "EXCLUDED." + tokenColumn, "EXCLUDED." + ownerColumn);
    }

    private String keyCondition(int firstIndex) {
        StringJoiner where = new StringJoiner(" AND ");
        int index = firstIndex;
        for (Column c : keys) {
            where.add(c.quoted() + " = $" + index++);
        }
        return where.toString();
    }

    private static int bindAll(Statement statement, List<Column> columns, int first) {
        int index = first;
        for (Column c : columns) {
            Object value = c.value();
            Class<?> nullType = c.nullType();
            if (value != null) {
                statement.bind(index, value);
            } else if (nullType != null) {
                statement.bindNull(index, nullType);
            }
            index++;
        }
        return index;
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

    private String schemaDescription() {
        return "table " + quotedTable + " with key, value, token " + tokenColumn + " (bigint) and owner " + ownerColumn
                + " (text) columns";
    }

    private FencedWrite copy(List<Column> newKeys, List<Column> newValues) {
        return new FencedWrite(table, quotedTable, newKeys, newValues, tokenColumn, ownerColumn, rule, observations, guard);
    }

    /**
     * Makes every write of this spec a Micrometer observation {@code fenced.write} (low-cardinality keys
     * {@code fenced.table} and {@code outcome}: written, stale, not_found, error; the lock name as the
     * high-cardinality key {@code fenced.lock.name}), so traces show fenced writes. Needs
     * {@code io.micrometer:micrometer-observation} on the class path.
     *
     * @param registry the observation registry
     * @return a new spec
     */
    public FencedWrite observe(io.micrometer.observation.ObservationRegistry registry) {
        return new FencedWrite(table, quotedTable, keys, values, tokenColumn, ownerColumn, rule,
                Objects.requireNonNull(registry, "registry must not be null"), guard);
    }

    private FencedWrite checkDistinct() {
        Set<String> seen = new HashSet<>();
        seen.add(tokenColumn);
        seen.add(ownerColumn);
        for (Column c : keys) {
            if (!seen.add(c.quoted())) {
                throw new IllegalArgumentException("Column " + c.name() + " appears twice in the fenced write of " + table);
            }
        }
        for (Column c : values) {
            if (!seen.add(c.quoted())) {
                throw new IllegalArgumentException("Column " + c.name() + " appears twice in the fenced write of " + table
                        + " (the token and owner columns are set by the write itself)");
            }
        }
        return this;
    }

    @Override
    public String toString() {
        return "FencedWrite{" + target() + ", rule=" + rule + (guard == null ? "" : ", guardedBy=" + guard) + "}";
    }

    private record Column(String name, String quoted, @Nullable Object value, @Nullable Class<?> nullType) {
    }
}
