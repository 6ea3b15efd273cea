package dev.fenced.r2dbc;

import dev.fenced.lock.FencedLockException;

/**
 * A fenced update found no row to update: the row does not exist. This is not a stale token; use an
 * upsert for rows that may not exist yet. Immutable and thread-safe.
 */
public final class FencedRowNotFoundException extends FencedLockException {

    private static final long serialVersionUID = 1L;

    private final String target;

    private FencedRowNotFoundException(String lockName, String target) {
        super(lockName, "No row to update in " + target + " (write under lock '" + lockName + "')", null);
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
        return new FencedRowNotFoundException(lockName, target);
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
