package dev.fenced.lock;

/**
 * A write was refused before it reached storage because its lease is no longer held: it was released,
 * lost, or is past its validity deadline. Acquire a new lease. Immutable and thread-safe.
 */
public final class LeaseNotHeldException extends FencedLockException {

    private static final long serialVersionUID = 1L;

    private final long token;

    private LeaseNotHeldException(String lockName, long token) {
        super(lockName, "The lease on lock '" + lockName + "' with fencing token " + token
                + " is not held (released, lost or past its deadline); the write was not sent", null);
        this.token = token;
    }

    /**
     * Creates the exception.
     *
     * @param lockName the lock name
     * @param token the lease's token
     * @return a new exception
     */
    public static LeaseNotHeldException of(String lockName, long token) {
        return new LeaseNotHeldException(lockName, token);
    }

    /**
     * The token of the lease that is not held.
     *
     * @return the token
     */
    public long token() {
        return token;
    }
}
