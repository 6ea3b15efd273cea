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

    /**
     * Texts of multi-row statements kept at most, apart from the others: one shape has a text per row count, and
     * batches of varying sizes must not crowd the single-row shapes out.
     */
    static final int MULTI_ROW_LIMIT = 256;

    private static final Map<String, Sql> TEXT = new ConcurrentHashMap<>();

    private static final Map<String, Sql> MULTI_ROW = new ConcurrentHashMap<>();

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
        return get(TEXT, LIMIT, shape, build);
    }

    /**
     * The SQL of a multi-row statement of a shape for {@code rows} rows, built by {@code build} the first time; kept
     * in a bound of its own ({@link #MULTI_ROW_LIMIT}).
     *
     * @param shape what the text depends on besides the row count
     * @param rows the row count
     * @param build builds the text
     * @return the text
     */
    static Sql getMultiRow(String shape, int rows, Supplier<Sql> build) {
        return get(MULTI_ROW, MULTI_ROW_LIMIT, shape + '\u0000' + rows, build);
    }

    private static Sql get(Map<String, Sql> cache, int limit, String key, Supplier<Sql> build) {
        Sql sql = cache.get(key);
        if (sql != null) {
            return sql;
        }
        sql = build.get();
        if (cache.size() < limit) {
            Sql raced = cache.putIfAbsent(key, sql);
            return raced != null ? raced : sql;
        }
        return sql;
    }
}
