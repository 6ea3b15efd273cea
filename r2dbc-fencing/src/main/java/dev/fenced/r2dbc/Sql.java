package dev.fenced.r2dbc;

import io.r2dbc.spi.Statement;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The text of a statement and, for each of its bind markers in order, the index of the value it takes; built
 * once per statement shape and dialect ({@link SqlCache}). Immutable and thread-safe.
 *
 * @param text the SQL text
 * @param slots for marker {@code i} (in binding order), the index of its value
 */
record Sql(String text, int[] slots) {

    /** A value to bind: {@code value}, or {@code NULL} of {@code nullType}. */
    record Param(@Nullable Object value, @Nullable Class<?> nullType) {

        static Param of(Object value) {
            return new Param(value, null);
        }
    }

    /**
     * Binds the values to a statement of this text.
     *
     * @param statement the statement, created from {@link #text()}
     * @param values the values, by index
     * @return the statement
     */
    Statement bind(Statement statement, List<Param> values) {
        for (int i = 0; i < slots.length; i++) {
            Param p = values.get(slots[i]);
            Object value = p.value();
            if (value != null) {
                statement.bind(i, value);
            } else {
                Class<?> type = p.nullType();
                statement.bindNull(i, type == null ? Object.class : type);
            }
        }
        return statement;
    }

    /** A column, expression or bound value in a condition. */
    @FunctionalInterface
    interface Operand {

        void appendTo(Builder sql);

        /** A column or expression, already quoted. */
        static Operand sql(String text) {
            return b -> b.append(text);
        }

        /** The bound value {@code index}. */
        static Operand value(int index) {
            return b -> b.param(index);
        }
    }

    /** Builds the text of one statement in one dialect, recording the value each marker takes. Not thread-safe. */
    static final class Builder {

        private final SqlDialect dialect;
        private final StringBuilder text = new StringBuilder();
        private final List<Integer> slots = new ArrayList<>();
        private int values;

        Builder(SqlDialect dialect) {
            this.dialect = dialect;
        }

        Builder append(String sql) {
            text.append(sql);
            return this;
        }

        /** Appends a quoted identifier. */
        Builder id(String name) {
            text.append(dialect.quote(name));
            return this;
        }

        /** Appends the marker of value {@code index} (with {@code ?} markers, each use binds the value again). */
        Builder param(int index) {
            values = Math.max(values, index + 1);
            if (!dialect.numberedMarkers()) {
                slots.add(index);
            }
            text.append(dialect.marker(index));
            return this;
        }

        /** Appends an operand: a column or expression, or a bound value. */
        Builder operand(Operand operand) {
            operand.appendTo(this);
            return this;
        }

        Sql build() {
            int[] order;
            if (dialect.numberedMarkers()) {
                order = new int[values];
                for (int i = 0; i < values; i++) {
                    order[i] = i;
                }
            } else {
                order = slots.stream().mapToInt(Integer::intValue).toArray();
            }
            return new Sql(text.toString(), order);
        }
    }
}
