package dev.fenced.lock.internal.postgres;

import dev.fenced.lock.FencedLockException;
import dev.fenced.lock.LockServiceException;
import io.r2dbc.spi.R2dbcException;
import java.time.Duration;
import java.util.concurrent.TimeoutException;

/** The one place where R2DBC and PostgreSQL errors become Fenced's exceptions. */
final class PostgresErrors {

    /** SQLSTATE undefined_table. */
    private static final String UNDEFINED_TABLE = "42P01";

    private PostgresErrors() {
    }

    /**
     * Classifies a failure of a lease statement.
     *
     * @param error the failure
     * @param lockName the lock concerned, or the empty string
     * @param operation what was attempted
     * @param timeout the command timeout in force
     * @param table the lease table, for the message of a missing table
     * @return a {@link FencedLockException}: the error itself if it already is one
     */
    static FencedLockException classify(Throwable error, String lockName, String operation, Duration timeout, String table) {
        if (error instanceof FencedLockException fenced) {
            return fenced;
        }
        String detail;
        if (error instanceof NotConnectedException) {
            detail = "cannot connect to PostgreSQL (" + error.getMessage() + ")";
        } else if (error instanceof TimeoutException) {
            detail = "no reply within the command timeout of " + timeout.toMillis() + " ms";
        } else if (error instanceof R2dbcException sql && UNDEFINED_TABLE.equals(sql.getSqlState())) {
            detail = "the lease table " + table + " does not exist (create it with PostgresLeaseTable.create)";
        } else if (error instanceof R2dbcException sql) {
            detail = "PostgreSQL answered with an error: [" + sql.getSqlState() + "] " + sql.getMessage();
        } else {
            detail = "unexpected " + error.getClass().getSimpleName() + ": " + error.getMessage();
        }
        return LockServiceException.of(lockName, operation, detail, error);
    }

    /**
     * Whether a failure came before the statement left this process: no connection could be had from the
     * connection factory, or the store was closed. Such a statement changed nothing. A timeout, a reset or a
     * database error may come after the statement ran.
     *
     * @param error a failure, classified or not
     * @return whether the statement certainly never reached the database
     */
    static boolean neverSent(Throwable error) {
        Throwable cause = error instanceof LockServiceException && error.getCause() != null ? error.getCause() : error;
        return cause instanceof NotConnectedException;
    }

    /** A statement that never left: no connection could be had for it, or the store was closed. */
    static final class NotConnectedException extends RuntimeException {

        private static final long serialVersionUID = 1L;

        NotConnectedException(String message, @org.jspecify.annotations.Nullable Throwable cause) {
            super(message, cause, false, false);
        }
    }
}
