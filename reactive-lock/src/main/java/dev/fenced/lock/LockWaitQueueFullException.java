package dev.fenced.lock;

/**
 * An acquire that would have waited was refused at once: as many acquires of this client as allowed
 * ({@link FencedLockClientBuilder#maxWaitersPerLock(int)}) already wait for the lock. Back off, or shed the
 * work. Raised before any I/O. Immutable and thread-safe.
 */
public final class LockWaitQueueFullException extends FencedLockException {

    private static final long serialVersionUID = 1L;

    private final int limit;

    private LockWaitQueueFullException(String lockName, int limit) {
        super(lockName, "Lock '" + lockName + "' already has " + limit + " acquires of this client waiting for it, "
                + "the most allowed (maxWaitersPerLock); this one was refused", null);
        this.limit = limit;
    }

    /**
     * Creates the exception.
     *
     * @param lockName the lock name
     * @param limit the most acquires allowed to wait for one lock
     * @return a new exception
     */
    public static LockWaitQueueFullException of(String lockName, int limit) {
        return new LockWaitQueueFullException(lockName, limit);
    }

    /**
     * The most acquires of one client allowed to wait for one lock.
     *
     * @return the limit
     */
    public int limit() {
        return limit;
    }
}
