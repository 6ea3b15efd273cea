package dev.fenced.r2dbc;

import io.r2dbc.spi.R2dbcException;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/** The one place where database errors of fenced statements are classified, for every supported dialect. */
final class SqlErrors {

    /** Undefined column and table: PostgreSQL's 42703 and 42P01, MariaDB's and MySQL's 42S22 and 42S02. */
    private static final Set<String> SCHEMA_MISMATCH = Set.of("42703", "42P01", "42S22", "42S02");

    /** A unique key taken: PostgreSQL's 23505; MariaDB and MySQL say 23000 with error 1062 (ER_DUP_ENTRY). */
    private static final String PG_UNIQUE_VIOLATION = "23505";
    private static final String INTEGRITY_VIOLATION = "23000";
    private static final int ER_DUP_ENTRY = 1062;

    /**
     * Serialization failure (PostgreSQL under REPEATABLE READ and SERIALIZABLE; MariaDB's and MySQL's deadlock, error
     * 1213, reports it too) and PostgreSQL's deadlock.
     */
    private static final Set<String> CONFLICT = Set.of("40001", "40P01");

    /** A lock wait that timed out: MariaDB's and MySQL's error 1205 (ER_LOCK_WAIT_TIMEOUT), PostgreSQL's 55P03. */
    private static final int ER_LOCK_WAIT_TIMEOUT = 1205;
    private static final String PG_LOCK_NOT_AVAILABLE = "55P03";

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
        if (error instanceof R2dbcException r2dbc && SCHEMA_MISMATCH.contains(r2dbc.getSqlState())) {
            return new IllegalStateException("The fenced write expects " + schema + ", but the database says: "
                    + r2dbc.getMessage(), error);
        }
        return error;
    }

    /**
     * Whether an insert failed because another writer inserted a row with the same key first.
     *
     * @param error the failure
     * @return whether it is a duplicate key
     */
    static boolean isDuplicateKey(Throwable error) {
        if (error instanceof R2dbcException r2dbc) {
            String state = r2dbc.getSqlState();
            return PG_UNIQUE_VIOLATION.equals(state) || (INTEGRITY_VIOLATION.equals(state) && r2dbc.getErrorCode() == ER_DUP_ENTRY);
        }
        return false;
    }

    /**
     * The SQLSTATE of a serialization failure or deadlock, the database's refusal to decide a statement against a
     * concurrent transaction.
     *
     * @param error the failure
     * @return the SQLSTATE, or {@code null} when the error is something else
     */
    static @Nullable String conflictState(Throwable error) {
        if (error instanceof R2dbcException r2dbc && CONFLICT.contains(r2dbc.getSqlState())) {
            return r2dbc.getSqlState();
        }
        return null;
    }

    /**
     * Makes a serialization failure, deadlock or lock wait timeout (MariaDB's error 1205, PostgreSQL's
     * {@code lock_timeout}, 55P03) of a fenced statement the typed {@link FencedWriteConflictException}.
     *
     * @param error the failure
     * @param lockName the lock of the lease that wrote
     * @param target what was written
     * @return the error to emit
     */
    static Throwable conflict(Throwable error, String lockName, String target) {
        String state = conflictState(error);
        if (state != null) {
            return FencedWriteConflictException.of(lockName, target, state, error);
        }
        if (error instanceof R2dbcException r2dbc && (r2dbc.getErrorCode() == ER_LOCK_WAIT_TIMEOUT
                || PG_LOCK_NOT_AVAILABLE.equals(r2dbc.getSqlState()))) {
            return FencedWriteConflictException.lockWaitTimedOut(lockName, target, r2dbc.getSqlState(), r2dbc.getErrorCode(), error);
        }
        return error;
    }
}
