package dev.fenced.r2dbc;

import dev.fenced.lock.FencedLockException;
import org.jspecify.annotations.Nullable;

/**
 * A fenced write with a lease check ({@link FencedWrite#checkLease}, {@link FenceTable#checkLease}) was refused
 * because the lease table does not show its lease as held: the lock's row is missing, free, expired by the
 * database's clock, or holds another grant. Nothing was written; the write's own transaction was rolled back (a
 * surrounding Spring transaction gets this error, and rolls back unless the application handles it).
 *
 * <p>The lease object may still believe it holds the lock (its renewal has not run yet, or its holder stalled);
 * the lock client finds the loss at its next renewal. Acquire a new lease. Immutable and thread-safe.
 */
public final class LeaseCheckFailedException extends FencedLockException {

    private static final long serialVersionUID = 1L;

    /** What the lease table holds for the lock instead of the lease. */
    public enum Finding {

        /** The table has no row for the lock id: the lease was not granted by a client on this table. */
        NO_ROW("the table has no row for it"),

        /** The row is free: the lease was released. */
        FREE("its row is free (released)"),

        /** The row still holds this owner and token, but its expiry has passed by the database's clock. */
        EXPIRED("its row expired by the database's clock"),

        /** The row holds another grant: another owner (or another token) took the lock. */
        OTHER_GRANT("its row holds another grant");

        private final String description;

        Finding(String description) {
            this.description = description;
        }

        /**
         * The finding, as in the exception's message.
         *
         * @return a short description
         */
        public String description() {
            return description;
        }
    }

    private final String lockId;
    private final long token;
    private final String leaseTable;
    private final Finding finding;
    private final @Nullable Long storedToken;

    private LeaseCheckFailedException(String lockName, String lockId, long token, String leaseTable, Finding finding,
            @Nullable Long storedToken) {
        super(lockName, "The lease on lock '" + lockName + "' (lock id " + lockId + ") with fencing token " + token
                + " is not held in lease table " + leaseTable + ": " + finding.description()
                + (finding == Finding.OTHER_GRANT ? ", with token " + storedToken : "") + "; nothing was written", null);
        this.lockId = lockId;
        this.token = token;
        this.leaseTable = leaseTable;
        this.finding = finding;
        this.storedToken = storedToken;
    }

    /**
     * Creates the exception.
     *
     * @param lockName the lock name
     * @param lockId the lease's lock id, the row's key
     * @param token the lease's token
     * @param leaseTable the lease table's name
     * @param finding what the table holds instead
     * @param storedToken the token of the row, or {@code null} when there is no row
     * @return a new exception
     */
    public static LeaseCheckFailedException of(String lockName, String lockId, long token, String leaseTable,
            Finding finding, @Nullable Long storedToken) {
        return new LeaseCheckFailedException(lockName, lockId, token, leaseTable, finding, storedToken);
    }

    /**
     * The lock id of the lease, the key of its row.
     *
     * @return the lock id
     */
    public String lockId() {
        return lockId;
    }

    /**
     * The token of the refused lease.
     *
     * @return the token
     */
    public long token() {
        return token;
    }

    /**
     * The lease table that was checked.
     *
     * @return its name
     */
    public String leaseTable() {
        return leaseTable;
    }

    /**
     * What the table holds instead of the lease.
     *
     * @return the finding
     */
    public Finding finding() {
        return finding;
    }

    /**
     * The token the lock's row holds (its counter), or {@code null} when there is no row.
     *
     * @return the stored token
     */
    public @Nullable Long storedToken() {
        return storedToken;
    }
}
