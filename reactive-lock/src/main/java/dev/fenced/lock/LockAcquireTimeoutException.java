package dev.fenced.lock;

import java.time.Duration;

/**
 * A lock could not be acquired within the maximum wait. Nothing is left behind: an attempt that was
 * in flight when the wait ended is undone by an owner-checked release. Immutable and thread-safe.
 */
public final class LockAcquireTimeoutException extends FencedLockException {

    private static final long serialVersionUID = 1L;

    private final Duration waited;

    private LockAcquireTimeoutException(String lockName, Duration waited) {
        super(lockName, "Timed out after " + waited.toMillis() + " ms waiting for lock '" + lockName + "'", null);
        this.waited = waited;
    }

    /**
     * Creates the exception.
     *
     * @param lockName the lock name
     * @param waited how long the caller waited
     * @return a new exception
     */
    public static LockAcquireTimeoutException of(String lockName, Duration waited) {
        return new LockAcquireTimeoutException(lockName, waited);
    }

    /**
     * How long the caller waited before giving up (the maximum wait of the request).
     *
     * @return the wait
     */
    public Duration waited() {
        return waited;
    }
}
