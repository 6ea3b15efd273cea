package dev.fenced.r2dbc;

import dev.fenced.lock.FencedLockException;

/**
 * A fenced update found no row to update: no row is visible to the locking read. This is not a stale token; use an
 * upsert for rows that may not exist yet. At READ COMMITTED (and on MariaDB at any level) the row does not exist. In
 * a PostgreSQL transaction at {@code REPEATABLE READ} or {@code SERIALIZABLE} ({@link #invisibleToSnapshot}) it is
 * not visible to the transaction's snapshot, and a row another transaction (such as a newer holder) inserted after
 * the snapshot is invisible too: retry in a new transaction to tell (a new snapshot sees such a row, and the retry is
 * refused as stale). Immutable and thread-safe.
 */
public final class FencedRowNotFoundException extends FencedLockException {

    private static final long serialVersionUID = 1L;

    private final String target;

    private FencedRowNotFoundException(String lockName, String target, String detail) {
        super(lockName, "No row to update in " + target + " (write under lock '" + lockName + "')" + detail, null);
        this.target = target;
    }

    /**
     * Creates the exception.
     *
     * @param lockName the lock whose lease made the write
     * @param target what was to be written, such as {@code "invoices (id = 42)"}
     * @return a new exception
     */
    public static FencedRowNotFoundException of(String lockName, String target) {
        return new FencedRowNotFoundException(lockName, target, "");
    }

    /**
     * No row is visible to the transaction's snapshot, at PostgreSQL's {@code REPEATABLE READ} or
     * {@code SERIALIZABLE}: a row another transaction inserted after the snapshot is invisible too, even to a locking
     * read, and nothing inside the transaction tells the two apart. Retry in a new transaction to tell.
     *
     * @param lockName the lock whose lease made the write
     * @param target what was to be written
     * @param isolation the transaction's isolation level as the database names it, such as {@code repeatable read}
     * @return a new exception
     */
    public static FencedRowNotFoundException invisibleToSnapshot(String lockName, String target, String isolation) {
        return new FencedRowNotFoundException(lockName, target, ": no row is visible to this transaction's snapshot; at "
                + isolation + " a row another transaction inserted after the snapshot is invisible too, so retry in a "
                + "new transaction to tell");
    }

    /**
     * What was to be written, such as {@code "invoices (id = 42)"}.
     *
     * @return the target
     */
    public String target() {
        return target;
    }
}
