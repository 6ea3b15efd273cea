package dev.fenced.lock;

/**
 * The lock client was closed: no new lease can be acquired through it, and waits in progress were
 * ended. Immutable and thread-safe.
 */
public final class LockClientClosedException extends FencedLockException {

    private static final long serialVersionUID = 1L;

    private LockClientClosedException(String lockName) {
        super(lockName, lockName.isEmpty()
                ? "The lock client is closed"
                : "The lock client is closed; cannot acquire lock '" + lockName + "'", null);
    }

    /**
     * Creates the exception for a request on a lock.
     *
     * @param lockName the lock name, or the empty string when the request concerns no single lock
     * @return a new exception
     */
    public static LockClientClosedException of(String lockName) {
        return new LockClientClosedException(lockName);
    }
}
