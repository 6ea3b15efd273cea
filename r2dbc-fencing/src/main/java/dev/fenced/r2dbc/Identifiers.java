package dev.fenced.r2dbc;

import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;

/** Validation and quoting of SQL identifiers: nothing user-supplied is ever concatenated unchecked. */
final class Identifiers {

    private static final Pattern PART = Pattern.compile("[A-Za-z_][A-Za-z0-9_]{0,62}");

    /** Column names already checked, quoted; bounded like {@link SqlCache}. */
    private static final Map<String, String> QUOTED_COLUMNS = new ConcurrentHashMap<>();

    private Identifiers() {
    }

    /**
     * Checks a column name and quotes it.
     *
     * @param name the name
     * @param what what it names, for the message
     * @return the quoted identifier
     */
    static String column(String name, String what) {
        Objects.requireNonNull(name, () -> what + " must not be null");
        String quoted = QUOTED_COLUMNS.get(name);
        if (quoted != null) {
            return quoted;
        }
        if (!PART.matcher(name).matches()) {
            throw invalid(name, what);
        }
        quoted = '"' + name + '"';
        if (QUOTED_COLUMNS.size() < SqlCache.LIMIT) {
            QUOTED_COLUMNS.putIfAbsent(name, quoted);
        }
        return quoted;
    }

    /**
     * Checks a table name, optionally schema-qualified, and quotes it.
     *
     * @param name the name, such as {@code invoices} or {@code billing.invoices}
     * @param what what it names, for the message
     * @return the quoted identifier
     */
    static String table(String name, String what) {
        Objects.requireNonNull(name, () -> what + " must not be null");
        int dot = name.indexOf('.');
        if (dot < 0) {
            return column(name, what);
        }
        String schema = name.substring(0, dot);
        String table = name.substring(dot + 1);
        if (!PART.matcher(schema).matches() || !PART.matcher(table).matches()) {
            throw invalid(name, what);
        }
        return '"' + schema + "\".\"" + table + '"';
    }

    private static IllegalArgumentException invalid(String name, String what) {
        return new IllegalArgumentException("Not a valid " + what + ": '" + name + "' (use letters, digits and "
                + "underscores, not starting with a digit, at most 63 characters; a table may be schema-qualified)");
    }
}
