package dev.fenced.r2dbc;

import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;

/**
 * Validation of SQL identifiers: nothing user-supplied is ever concatenated unchecked. Quoting is the
 * dialect's ({@link SqlDialect#quote}).
 */
final class Identifiers {

    private static final Pattern PART = Pattern.compile("[A-Za-z_][A-Za-z0-9_]{0,62}");

    /** Column names already checked; bounded like {@link SqlCache}. */
    private static final Set<String> CHECKED = ConcurrentHashMap.newKeySet();

    private Identifiers() {
    }

    /**
     * Checks a column name.
     *
     * @param name the name
     * @param what what it names, for the message
     * @return the name
     */
    static String column(String name, String what) {
        Objects.requireNonNull(name, () -> what + " must not be null");
        if (CHECKED.contains(name)) {
            return name;
        }
        if (!PART.matcher(name).matches()) {
            throw invalid(name, what);
        }
        if (CHECKED.size() < SqlCache.LIMIT) {
            CHECKED.add(name);
        }
        return name;
    }

    /**
     * Checks a table name, optionally schema-qualified.
     *
     * @param name the name, such as {@code invoices} or {@code billing.invoices}
     * @param what what it names, for the message
     * @return the name
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
        return name;
    }

    private static IllegalArgumentException invalid(String name, String what) {
        return new IllegalArgumentException("Not a valid " + what + ": '" + name + "' (use letters, digits and "
                + "underscores, not starting with a digit, at most 63 characters; a table may be schema-qualified)");
    }
}
