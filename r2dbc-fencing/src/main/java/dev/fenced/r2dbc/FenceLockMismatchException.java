package dev.fenced.r2dbc;

import dev.fenced.lock.FencedLockException;

/**
 * A lease tried to advance a fence row that holds the tokens of another lock. A fence row compares the
 * tokens of one lock only (its {@link dev.fenced.lock.FencedLease#lockId() lock id}: key prefix and name);
 * tokens of two locks come from two counters and say nothing about each other, so the write is refused
 * before anything is written. Guard a resource with one lock, or give each lock its own resource name.
 * Immutable and thread-safe.
 */
public final class FenceLockMismatchException extends FencedLockException {

    private static final long serialVersionUID = 1L;

    private final String resource;
    private final String fencedBy;
    private final String presented;

    private FenceLockMismatchException(String lockName, String fence, String resource, String fencedBy, String presented) {
        super(lockName, "Resource '" + resource + "' of fence " + fence + " holds the tokens of lock " + fencedBy
                + "; the lease on lock " + presented + " cannot advance it (tokens of different locks cannot be compared)",
                null);
        this.resource = resource;
        this.fencedBy = fencedBy;
        this.presented = presented;
    }

    /**
     * Creates the exception.
     *
     * @param lockName the name of the presented lease's lock
     * @param fence the fence table
     * @param resource the resource
     * @param fencedBy the lock id the fence row holds tokens of
     * @param presented the lock id of the presented lease
     * @return a new exception
     */
    public static FenceLockMismatchException of(String lockName, String fence, String resource, String fencedBy, String presented) {
        return new FenceLockMismatchException(lockName, fence, resource, fencedBy, presented);
    }

    /**
     * The resource whose fence was to be advanced.
     *
     * @return the resource
     */
    public String resource() {
        return resource;
    }

    /**
     * The lock id whose tokens the fence row holds.
     *
     * @return the lock id
     */
    public String fencedBy() {
        return fencedBy;
    }

    /**
     * The lock id of the lease that was refused.
     *
     * @return the lock id
     */
    public String presented() {
        return presented;
    }
}
