package dev.fenced.r2dbc;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;

/**
 * The SQL of fenced statements, built once per statement shape (kind, dialect, table, columns, rule) rather than for
 * every write: a batch builds a new {@link FencedWrite} per row, and the same text also lets the driver reuse
 * its prepared statement. Bounded, so that an application generating endless shapes cannot grow it without
 * limit: past the bound, text is built and not kept. Thread-safe.
 */
final class SqlCache {

    /** Shapes kept at most; applications have a handful. */
    static final int LIMIT = 1024;

    private static final Map<String, Sql> TEXT = new ConcurrentHashMap<>();

    private SqlCache() {
    }

    /**
     * The SQL of a shape, built by {@code build} the first time.
     *
     * @param shape what the text depends on
     * @param build builds the text
     * @return the text
     */
    static Sql get(String shape, Supplier<Sql> build) {
        Sql sql = TEXT.get(shape);
        if (sql != null) {
            return sql;
        }
        sql = build.get();
        if (TEXT.size() < LIMIT) {
            Sql raced = TEXT.putIfAbsent(shape, sql);
            return raced != null ? raced : sql;
        }
        return sql;
    }
}
