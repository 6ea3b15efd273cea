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
    /** SQLSTATE class connection_exception, which the driver also reports for resets and I/O errors. */
    private static final String CONNECTION_EXCEPTION_CLASS = "08";
    /** SQLSTATE serialization_failure. */
    private static final String SERIALIZATION_FAILURE = "40001";
    /** SQLSTATE lock_not_available: a lock wait outlasted the statement's {@code lock_timeout}. */
    private static final String LOCK_NOT_AVAILABLE = "55P03";
    /** SQLSTATE deadlock_detected: the database rolled the statement back to break a cycle of lock waits. */
    private static final String DEADLOCK_DETECTED = "40P01";

    /** SQLSTATE undefined_column. */
    private static final String UNDEFINED_COLUMN = "42703";

    private PostgresErrors() {
    }

    /**
     * Whether a statement failed because the lease table has no {@code holder} column (a table created by an
     * earlier version): the statement changed nothing.
     *
     * @param error the failure, classified or not
     * @return whether it is that
     */
    static boolean missingHolderColumn(Throwable error) {
        for (Throwable e = error; e != null; e = e.getCause()) {
            if (e instanceof R2dbcException sql && UNDEFINED_COLUMN.equals(sql.getSqlState())
                    && String.valueOf(sql.getMessage()).contains("holder")) {
                return true;
            }
        }
        return false;
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
        if (error instanceof NotConnectedException notConnected) {
            detail = notConnected.queued ? "not sent: " + error.getMessage()
                    : "cannot connect to PostgreSQL (" + error.getMessage() + ")";
        } else if (error instanceof TimeoutException) {
            detail = "no reply within the command timeout of " + timeout.toMillis() + " ms";
        } else if (lost(error)) {
            detail = "the connection to PostgreSQL was lost (" + (error instanceof R2dbcException sql && sql.getSqlState() != null
                    ? "[" + sql.getSqlState() + "] " : error.getClass().getSimpleName() + ": ") + error.getMessage() + ")";
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

    /**
     * Whether the database answered the statement with an error: it has ended there and changed nothing, so
     * there is nothing to cancel. A failure without a SQLSTATE, or of class 08 (a reset, an I/O error, a closed
     * connection: the driver reports 08006), is not an answer.
     *
     * @param error a failure, classified or not
     * @return whether the database answered
     */
    static boolean answered(Throwable error) {
        String state = sqlState(error);
        return state != null && !state.startsWith(CONNECTION_EXCEPTION_CLASS);
    }

    /**
     * Whether a statement failed to serialize (at {@code REPEATABLE READ} or {@code SERIALIZABLE}): its
     * transaction, this one statement, was rolled back.
     *
     * @param error a failure, classified or not
     * @return whether it is SQLSTATE 40001
     */
    static boolean serializationFailure(Throwable error) {
        return SERIALIZATION_FAILURE.equals(sqlState(error));
    }

    /**
     * Whether an acquire that failed so took nothing because the lock's row was taken by another session for
     * longer than it may wait, or changed under it each time it ran: the lock is busy, for a time nobody knows.
     *
     * @param error a failure of an acquire, classified or not
     * @return whether it is SQLSTATE 40001 (after the retries) or 55P03
     */
    static boolean busy(Throwable error) {
        String state = sqlState(error);
        return SERIALIZATION_FAILURE.equals(state) || LOCK_NOT_AVAILABLE.equals(state);
    }

    /**
     * Whether a statement of several locks was rolled back as a whole by a wait for one of them: failed to
     * serialize, outwaited its {@code lock_timeout} or was chosen to break a deadlock. It changed nothing, so each
     * lock it carried may be asked for again on its own.
     *
     * @param error a failure, unclassified
     * @return whether it is SQLSTATE 40001, 55P03 or 40P01
     */
    static boolean rolledBackByWait(Throwable error) {
        return busy(error) || DEADLOCK_DETECTED.equals(sqlState(error));
    }

    private static @org.jspecify.annotations.Nullable String sqlState(Throwable error) {
        Throwable cause = error instanceof LockServiceException && error.getCause() != null ? error.getCause() : error;
        return cause instanceof R2dbcException sql ? sql.getSqlState() : null;
    }

    /**
     * A failure of the connection rather than of the statement: SQLSTATE class 08 (the driver's 08006 on a
     * reset or an I/O error), or an I/O error below.
     */
    private static boolean lost(Throwable error) {
        String state = sqlState(error);
        if (state != null) {
            return state.startsWith(CONNECTION_EXCEPTION_CLASS);
        }
        for (Throwable t = error; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof java.io.IOException) {
                return true;
            }
        }
        return false;
    }

    /**
     * A statement that never left: no connection could be had for it, the store was closed, or its request waited
     * longer than the command timeout for a statement slot ({@link StatementBatcher}).
     */
    static final class NotConnectedException extends RuntimeException {

        private static final long serialVersionUID = 1L;

        /** Whether the statement was never sent because its request waited too long for a statement slot. */
        final boolean queued;

        NotConnectedException(String message, @org.jspecify.annotations.Nullable Throwable cause) {
            this(message, cause, false);
        }

        NotConnectedException(String message, @org.jspecify.annotations.Nullable Throwable cause, boolean queued) {
            super(message, cause, false, false);
            this.queued = queued;
        }
    }
}
