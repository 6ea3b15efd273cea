package dev.fenced.r2dbc;

import io.r2dbc.spi.R2dbcException;

/** The one place where database errors of fenced writes become clear messages. */
final class SqlErrors {

    private static final String UNDEFINED_COLUMN = "42703";
    private static final String UNDEFINED_TABLE = "42P01";

    private SqlErrors() {
    }

    /**
     * Explains a failure of a fenced statement.
     *
     * @param error the failure
     * @param schema what the statement expects of the schema, for the message
     * @return the error to emit
     */
    static Throwable classify(Throwable error, String schema) {
        if (error instanceof R2dbcException r2dbc) {
            String state = r2dbc.getSqlState();
            if (UNDEFINED_COLUMN.equals(state) || UNDEFINED_TABLE.equals(state)) {
                return new IllegalStateException("The fenced write expects " + schema + ", but the database says: "
                        + r2dbc.getMessage(), error);
            }
        }
        return error;
    }
}
