package dev.fenced.r2dbc;

import dev.fenced.lock.FencedLockException;
import dev.fenced.lock.LeaseNotHeldException;
import dev.fenced.lock.StaleFencingTokenException;
import io.r2dbc.spi.Connection;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The guarded update of many rows, each with its own lease ({@link FencedWrite#updateAll}): on PostgreSQL one
 * statement, {@code UPDATE t SET … FROM (VALUES (i, keys…, values…, token, owner), …) AS fenced_rows (…) WHERE
 * t.key = fenced_rows.key AND <rule of t's columns against the row's token and owner> RETURNING fenced_rows.fenced_i},
 * whose returned ordinals are the items written; the others are then read with one locking read of their rows, and
 * an item that read does not decide is explained by its own spec as the single-row write explains a refusal. On
 * MariaDB/MySQL, whose {@code UPDATE} cannot return what it wrote, one single-row write
 * per item. Stateless, so thread-safe.
 */
final class MultiRowUpdate {

    /** The most items one call takes. */
    static final int MAX_ITEMS = 1000;

    /** The most values one call binds: PostgreSQL binds at most 65,535 values in one statement. */
    static final int MAX_BINDS = 65_535;

    private static final String ROWS = "fenced_rows";

    private MultiRowUpdate() {
    }

    static Mono<List<FencedWrite.ItemOutcome>> run(Connection connection, List<FencedWrite.Item> items) {
        return Mono.defer(() -> {
            Objects.requireNonNull(connection, "connection must not be null");
            Objects.requireNonNull(items, "items must not be null");
            if (items.isEmpty()) {
                return Mono.just(List.<FencedWrite.ItemOutcome>of());
            }
            SqlDialect dialect = SqlDialect.of(connection);
            IllegalArgumentException problem = problemWith(items, dialect);
            if (problem != null) {
                return Mono.error(problem);
            }
            @Nullable FencedWrite.ItemOutcome[] outcomes = new FencedWrite.ItemOutcome[items.size()];
            List<Integer> toSend = new ArrayList<>(items.size());
            for (int i = 0; i < items.size(); i++) {
                FencedWrite.Item item = items.get(i);
                RuntimeException before = item.write().problemBeforeSql(item.lease());
                if (before instanceof LeaseNotHeldException notHeld) {
                    outcomes[i] = new FencedWrite.ItemOutcome(item, 0, notHeld);
                } else if (before != null) {
                    return Mono.error(before);
                } else {
                    toSend.add(i);
                }
            }
            Mono<Void> written = toSend.isEmpty() ? Mono.empty()
                    : dialect == SqlDialect.POSTGRESQL ? oneStatement(connection, dialect, items, toSend, outcomes)
                    : rowByRow(connection, items, toSend, outcomes);
            return written.then(Mono.fromSupplier(() -> {
                List<FencedWrite.ItemOutcome> all = new ArrayList<>(outcomes.length);
                for (FencedWrite.ItemOutcome outcome : outcomes) {
                    all.add(Objects.requireNonNull(outcome));
                }
                return all;
            }));
        });
    }

    private static @Nullable IllegalArgumentException problemWith(List<FencedWrite.Item> items, SqlDialect dialect) {
        if (items.size() > MAX_ITEMS) {
            return new IllegalArgumentException("A multi-row fenced write takes at most " + MAX_ITEMS + " items, was given "
                    + items.size());
        }
        FencedWrite first = items.get(0).write();
        int binds = items.size() * width(first);
        if (binds > MAX_BINDS) {
            return new IllegalArgumentException("A multi-row fenced write of " + first.table() + " binds " + width(first)
                    + " values a row, " + binds + " for " + items.size() + " items: at most " + MAX_BINDS + " values "
                    + "(PostgreSQL's limit), so at most " + MAX_BINDS / width(first) + " items of this shape");
        }
        Set<List<@Nullable Object>> keys = new HashSet<>();
        List<String> columns = first.columnNames();
        @Nullable Class<?>[] classes = new Class<?>[columns.size()];
        for (FencedWrite.Item item : items) {
            FencedWrite write = item.write();
            if (write.checksLease()) {
                return new IllegalArgumentException("A multi-row fenced write does not check leases (checkLease): "
                        + "write such rows one by one");
            }
            if (!write.hasKeys()) {
                return new IllegalArgumentException("A fenced write of " + write.table() + " needs at least one key(...)");
            }
            if (write != first && !write.sameShape(first)) {
                return new IllegalArgumentException("The items of a multi-row fenced write must have one shape (table, "
                        + "key and value columns in order, fencing columns, rule): " + write + " differs from " + first);
            }
            List<Sql.Param> params = write.columnParams();
            for (int c = 0; c < classes.length; c++) {
                Class<?> bound = boundClass(params.get(c));
                Class<?> seen = classes[c];
                if (seen == null) {
                    classes[c] = bound;
                } else if (bound != null && bound != seen) {
                    return new IllegalArgumentException("The items of a multi-row fenced write of " + write.table()
                            + " bind column " + columns.get(c) + " as " + seen.getName() + " and as " + bound.getName()
                            + ": give every item's value of one column one class (PostgreSQL's VALUES would convert "
                            + "them to one type)");
                }
            }
            if (!keys.add(write.keyValues())) {
                return new IllegalArgumentException("Two items of a multi-row fenced write have the key "
                        + write.keyColumns() + " = " + write.keyValues() + ": write each row once");
            }
        }
        for (int c = 0; c < classes.length; c++) {
            if (classes[c] == null) {
                return new IllegalArgumentException("Column " + columns.get(c) + " of a multi-row fenced write of "
                        + first.table() + " is NULL of type Object in every item, which gives PostgreSQL's VALUES no "
                        + "type: name the column's Java type in setNull(column, type)");
            }
        }
        return null;
    }

    /** The class a value binds as: its own, or a {@code NULL}'s named type; {@code null} for an untyped {@code NULL}. */
    private static @Nullable Class<?> boundClass(Sql.Param param) {
        Object value = param.value();
        if (value != null) {
            return value.getClass();
        }
        Class<?> type = param.nullType();
        return type == null || type == Object.class ? null : type;
    }

    /** The values one row binds: its ordinal, keys, set values, token and (if stored) owner. */
    private static int width(FencedWrite spec) {
        return 1 + spec.keyColumns().size() + spec.valueColumns().size() + (spec.ownerColumn() == null ? 1 : 2);
    }

    /** MariaDB/MySQL: each item's single-row guarded update, in turn. */
    private static Mono<Void> rowByRow(Connection connection, List<FencedWrite.Item> items, List<Integer> toSend,
            @Nullable FencedWrite.ItemOutcome[] outcomes) {
        return Flux.fromIterable(toSend)
                .concatMap(i -> {
                    FencedWrite.Item item = items.get(i);
                    return decided(item, item.write().update(connection, item.lease()))
                            .doOnNext(outcome -> outcomes[i] = outcome);
                })
                .then();
    }

    /** PostgreSQL: one statement for every item, then an explanation of each item it did not write. */
    private static Mono<Void> oneStatement(Connection connection, SqlDialect dialect, List<FencedWrite.Item> items,
            List<Integer> toSend, @Nullable FencedWrite.ItemOutcome[] outcomes) {
        FencedWrite first = items.get(toSend.get(0)).write();
        Sql sql = SqlCache.getMultiRow(first.shape("UPDATE", dialect), toSend.size(),
                () -> build(first, dialect, toSend.size()));
        List<Sql.Param> params = rowsOf(items, toSend, item -> item.write().rowParams(item.lease()));
        FencedWrite.Item firstItem = items.get(toSend.get(0));
        return Flux.from(sql.bind(connection.createStatement(sql.text()), params).execute())
                .flatMap(result -> result.map((row, meta) -> Objects.requireNonNull(row.get(0, Integer.class))))
                .collect(HashSet<Integer>::new, Set::add)
                .onErrorMap(e -> SqlErrors.classify(e, first.schemaDescriptionFor(dialect)))
                .onErrorMap(e -> SqlErrors.conflict(e, firstItem.lease().name(), first.table() + " (" + toSend.size()
                        + " rows)"))
                .flatMap(writtenRows -> {
                    List<Integer> unwritten = new ArrayList<>();
                    for (int row = 0; row < toSend.size(); row++) {
                        int i = toSend.get(row);
                        if (writtenRows.contains(row)) {
                            outcomes[i] = new FencedWrite.ItemOutcome(items.get(i), 1, null);
                        } else {
                            unwritten.add(i);
                        }
                    }
                    return unwritten.isEmpty() ? Mono.<Void>empty() : explainAll(connection, dialect, items, unwritten, outcomes);
                });
    }

    /** The values of a {@code VALUES} list: for each of the {@code chosen} items its ordinal r, then its {@code row} values. */
    private static List<Sql.Param> rowsOf(List<FencedWrite.Item> items, List<Integer> chosen,
            java.util.function.Function<FencedWrite.Item, List<Sql.Param>> row) {
        List<Sql.Param> params = new ArrayList<>();
        for (int r = 0; r < chosen.size(); r++) {
            params.add(Sql.Param.of(r));
            params.addAll(row.apply(items.get(chosen.get(r))));
        }
        return params;
    }

    /** What the locking read of the unwritten rows found of one: its item's ordinal, its token and owner. */
    private record Read(int row, @Nullable Long token, @Nullable String owner, String isolation) {
    }

    /**
     * The unwritten items explained with one locking read of their rows ({@code FOR KEY SHARE}, joined to their keys
     * by {@code VALUES}, as the statement joined them): at {@code READ COMMITTED} a row whose token the rule refuses is
     * that item's refusal, as the single-row write decides it. Every other item (no row, a row the rule accepts, or
     * a transaction at {@code REPEATABLE READ} or {@code SERIALIZABLE}, where the read may show the snapshot's
     * version) is explained by its own reads, as the single-row write explains it.
     */
    private static Mono<Void> explainAll(Connection connection, SqlDialect dialect, List<FencedWrite.Item> items,
            List<Integer> unwritten, @Nullable FencedWrite.ItemOutcome[] outcomes) {
        FencedWrite first = items.get(unwritten.get(0)).write();
        Sql sql = SqlCache.getMultiRow(first.shape("READ", dialect), unwritten.size(),
                () -> buildRead(first, dialect, unwritten.size()));
        List<Sql.Param> params = rowsOf(items, unwritten, item -> item.write().keyParamsOfRow());
        boolean owner = first.ownerColumn() != null;
        return Flux.from(sql.bind(connection.createStatement(sql.text()), params).execute())
                .flatMap(result -> result.map((row, meta) -> new Read(Objects.requireNonNull(row.get(0, Integer.class)),
                        row.get(1, Long.class), owner ? row.get(2, String.class) : null,
                        String.valueOf(row.get(owner ? 3 : 2, String.class)))))
                .collectList()
                .onErrorMap(e -> SqlErrors.classify(e, first.schemaDescriptionFor(dialect)))
                .onErrorMap(e -> SqlErrors.conflict(e, items.get(unwritten.get(0)).lease().name(), first.table() + " ("
                        + unwritten.size() + " rows)"))
                .flatMapMany(reads -> {
                    @Nullable Read[] byRow = new Read[unwritten.size()];
                    boolean readCommitted = true;
                    for (Read read : reads) {
                        byRow[read.row()] = read;
                        readCommitted &= read.isolation().equals("read committed");
                    }
                    boolean decides = readCommitted;
                    return Flux.range(0, unwritten.size()).concatMap(row -> {
                        int i = unwritten.get(row);
                        FencedWrite.Item item = items.get(i);
                        Read read = byRow[row];
                        RuntimeException refusal = decides && read != null
                                ? item.write().refusalOf(read.token(), read.owner(), item.lease()) : null;
                        if (refusal != null) {
                            outcomes[i] = new FencedWrite.ItemOutcome(item, 0, refusal);
                            return Mono.empty();
                        }
                        return decided(item, item.write().explainUnwritten(connection, dialect, item.lease()))
                                .doOnNext(outcome -> outcomes[i] = outcome);
                    });
                })
                .then();
    }

    /** The locking read of {@code rows} rows of {@code spec}'s shape by their keys, with the transaction's isolation. */
    private static Sql buildRead(FencedWrite spec, SqlDialect dialect, int rows) {
        List<String> keys = spec.keyColumns();
        String owner = spec.ownerColumn();
        Sql.Builder sql = new Sql.Builder(dialect).append("SELECT " + ROWS + ".fenced_i, fenced_t.").id(spec.tokenColumn());
        if (owner != null) {
            sql.append(", fenced_t.").id(owner);
        }
        sql.append(", current_setting('transaction_isolation') FROM ").append(dialect.quote(spec.table()))
                .append(" AS fenced_t JOIN ");
        values(sql, rows, 1 + keys.size(), keys.size()).append(") ON ");
        for (int k = 0; k < keys.size(); k++) {
            sql.append(k == 0 ? "" : " AND ").append("fenced_t.").id(keys.get(k)).append(" = " + ROWS + ".fenced_k" + k);
        }
        return sql.append(" FOR KEY SHARE OF fenced_t").build();
    }

    /**
     * Appends {@code (VALUES (…), …) AS fenced_rows (fenced_i, fenced_k0, …} for {@code rows} rows of {@code width}
     * values, row r's from value r × width: the ordinal and key columns named, the caller names the rest and closes.
     */
    private static Sql.Builder values(Sql.Builder sql, int rows, int width, int keys) {
        sql.append("(VALUES ");
        for (int r = 0; r < rows; r++) {
            sql.append(r == 0 ? "(" : ", (");
            for (int c = 0; c < width; c++) {
                sql.append(c == 0 ? "" : ", ").param(r * width + c);
            }
            sql.append(")");
        }
        sql.append(") AS " + ROWS + " (fenced_i");
        for (int k = 0; k < keys; k++) {
            sql.append(", fenced_k" + k);
        }
        return sql;
    }

    /** An item's outcome: its rows, or its refusal (stale, or no row); other errors fail the batch. */
    private static Mono<FencedWrite.ItemOutcome> decided(FencedWrite.Item item, Mono<Long> write) {
        return write.map(rows -> new FencedWrite.ItemOutcome(item, rows, null))
                .onErrorResume(MultiRowUpdate::isRefusal,
                        e -> Mono.just(new FencedWrite.ItemOutcome(item, 0, (FencedLockException) e)));
    }

    private static boolean isRefusal(Throwable e) {
        return e instanceof StaleFencingTokenException || e instanceof FencedRowNotFoundException
                || e instanceof LeaseNotHeldException;
    }

    /** The statement for {@code rows} rows of {@code spec}'s shape; the values of row r start at r × its width. */
    private static Sql build(FencedWrite spec, SqlDialect dialect, int rows) {
        List<String> keys = spec.keyColumns();
        List<String> values = spec.valueColumns();
        String owner = spec.ownerColumn();
        int width = width(spec);
        String table = dialect.quote(spec.table());
        Sql.Builder sql = new Sql.Builder(dialect).append("UPDATE ").append(table).append(" SET ");
        for (int v = 0; v < values.size(); v++) {
            sql.id(values.get(v)).append(" = " + ROWS + ".fenced_v" + v + ", ");
        }
        sql.id(spec.tokenColumn()).append(" = " + ROWS + ".fenced_token");
        if (owner != null) {
            sql.append(", ").id(owner).append(" = " + ROWS + ".fenced_owner");
        }
        values(sql.append(" FROM "), rows, width, keys.size());
        for (int v = 0; v < values.size(); v++) {
            sql.append(", fenced_v" + v);
        }
        sql.append(", fenced_token").append(owner == null ? "" : ", fenced_owner").append(") WHERE ");
        for (int k = 0; k < keys.size(); k++) {
            sql.append(k == 0 ? "" : " AND ").append(table + ".").id(keys.get(k)).append(" = " + ROWS + ".fenced_k" + k);
        }
        sql.append(" AND ");
        spec.rule().appendCondition(sql, Sql.Operand.sql(table + "." + dialect.quote(spec.tokenColumn())),
                owner == null ? null : Sql.Operand.sql(table + "." + dialect.quote(owner)),
                Sql.Operand.sql(ROWS + ".fenced_token"), owner == null ? null : Sql.Operand.sql(ROWS + ".fenced_owner"));
        return sql.append(" RETURNING " + ROWS + ".fenced_i").build();
    }
}
