package dev.fenced.r2dbc;

import dev.fenced.lock.FencedLockException;
import org.jspecify.annotations.Nullable;

/**
 * A fenced write (or fence advance, or lease check) could not be decided against a concurrent transaction: the
 * database aborted it with a serialization failure or a deadlock (SQLSTATE {@code 40001}, PostgreSQL's
 * {@code 40P01}), or, in auto-commit mode, the row changed again between the guarded statement and the locking read
 * that explains its refusal, or it waited for a row lock longer than the database allows
 * ({@link #lockWaitTimedOut}). It is never a success and never "row not found": nothing of the write was accepted.
 *
 * <p>Where it comes from: under {@code REPEATABLE READ} or {@code SERIALIZABLE} on PostgreSQL, a row that another
 * transaction changed after this transaction's snapshot cannot be written or locked (a newer holder's write after
 * a read of the stale holder's transaction ends this way); MariaDB reports deadlocks with this SQLSTATE. The
 * database has rolled the transaction back (PostgreSQL: it only accepts {@code ROLLBACK} now), so a surrounding
 * Spring transaction rolls back with this error. The lease is not told: the aborted statement read nothing. Retry
 * the whole transaction, with a fresh lease: the retry is refused with
 * {@link dev.fenced.lock.StaleFencingTokenException} if a newer holder has written. Immutable and thread-safe.
 */
public final class FencedWriteConflictException extends FencedLockException {

    private static final long serialVersionUID = 1L;

    private final String target;
    private final @Nullable String sqlState;

    private FencedWriteConflictException(String lockName, String target, @Nullable String sqlState, String reason,
            @Nullable Throwable cause) {
        super(lockName, "The fenced write to " + target + " under lock '" + lockName + "' conflicted with a concurrent "
                + "transaction (" + reason + "); nothing of it was accepted: roll the transaction back and retry it", cause);
        this.target = target;
        this.sqlState = sqlState;
    }

    /**
     * The database aborted the statement with a serialization failure or deadlock.
     *
     * @param lockName the lock whose lease made the write
     * @param target what was to be written, such as {@code "invoices (id = 42)"}
     * @param sqlState the database's SQLSTATE, such as {@code 40001}
     * @param cause the driver's error
     * @return a new exception
     */
    public static FencedWriteConflictException of(String lockName, String target, String sqlState, Throwable cause) {
        return new FencedWriteConflictException(lockName, target, sqlState, "the database could not serialize it, SQLSTATE "
                + sqlState, cause);
    }

    /**
     * The row changed between the guarded statement and the locking read that explains its refusal, twice (auto-commit
     * mode: nothing holds the row in between).
     *
     * @param lockName the lock whose lease made the write
     * @param target what was to be written
     * @return a new exception
     */
    public static FencedWriteConflictException changedDuringWrite(String lockName, String target) {
        return new FencedWriteConflictException(lockName, target, null, "the row changed while the write was decided", null);
    }

    /**
     * The guarded statement refused the write at PostgreSQL's {@code REPEATABLE READ} or {@code SERIALIZABLE}, and
     * the row changed after this transaction's snapshot: every read of the transaction shows an older version
     * (PostgreSQL's {@code FOR KEY SHARE} returns it without a serialization failure when the change kept the key),
     * so the token stored now cannot be read in it, and the lease is not told. The refusal is exact. Retry the
     * whole transaction: a new snapshot reads the stored token, and the retry is refused as stale
     * ({@link dev.fenced.lock.StaleFencingTokenException}) if a newer holder has written.
     *
     * @param lockName the lock whose lease made the write
     * @param target what was to be written
     * @param isolation the transaction's isolation level as the database names it, such as {@code repeatable read}
     * @return a new exception
     */
    public static FencedWriteConflictException refusedUnderSnapshot(String lockName, String target, String isolation) {
        return new FencedWriteConflictException(lockName, target, null, "the write was refused, and the row changed after "
                + "this transaction's snapshot at " + isolation + ", so the token stored now cannot be read in it", null);
    }

    /**
     * A statement of the write waited for a row lock longer than the database allows (MariaDB's and MySQL's
     * {@code innodb_lock_wait_timeout}, error 1205; PostgreSQL's {@code lock_timeout}, SQLSTATE {@code 55P03}):
     * another transaction holds the row. The statement took no effect; MariaDB rolls back that statement only
     * (unless {@code innodb_rollback_on_timeout}), so roll the transaction back yourself.
     *
     * @param lockName the lock whose lease made the write
     * @param target what was to be written
     * @param sqlState the database's SQLSTATE ({@code HY000} on MariaDB, {@code 55P03})
     * @param errorCode the database's error code (1205 on MariaDB, 0 where the driver reports none)
     * @param cause the driver's error
     * @return a new exception
     */
    public static FencedWriteConflictException lockWaitTimedOut(String lockName, String target, @Nullable String sqlState,
            int errorCode, Throwable cause) {
        return new FencedWriteConflictException(lockName, target, sqlState, "a row lock was not granted within the "
                + "database's lock wait timeout, SQLSTATE " + sqlState + (errorCode == 0 ? "" : ", error " + errorCode), cause);
    }

    /**
     * What was to be written, such as {@code "invoices (id = 42)"} or {@code "fence fenced_fence (resource = …)"}.
     *
     * @return the target
     */
    public String target() {
        return target;
    }

    /**
     * The database's SQLSTATE ({@code 40001} or {@code 40P01}; for a lock wait timeout {@code HY000} on MariaDB,
     * {@code 55P03} on PostgreSQL), or {@code null} when the row changed during the write or was refused under a
     * snapshot.
     *
     * @return the SQLSTATE
     */
    public @Nullable String sqlState() {
        return sqlState;
    }
}
