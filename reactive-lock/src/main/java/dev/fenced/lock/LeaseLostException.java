package dev.fenced.lock;

/**
 * The lease on a lock was lost before its holder released it: the holder must assume that another
 * client may now hold the lock, and that writes carrying {@link #token()} will be rejected by fenced
 * storage.
 *
 * <p>Emitted as an error by {@link FencedLockClient#withLease(String, java.util.function.Function)
 * withLease} (after the work was cancelled) and as a value by {@link FencedLease#lost()}.
 * Immutable and thread-safe.
 */
public final class LeaseLostException extends FencedLockException {

    private static final long serialVersionUID = 1L;

    private final long token;
    private final LossReason reason;

    private LeaseLostException(String lockName, long token, LossReason reason) {
        super(lockName, "Lease on lock '" + lockName + "' with fencing token " + token + " was lost: "
                + reason.description(), null);
        this.token = token;
        this.reason = reason;
    }

    /**
     * Creates the exception for a lost lease.
     *
     * @param lockName the lock name
     * @param token the fencing token of the lost lease
     * @param reason why it was lost
     * @return a new exception
     */
    public static LeaseLostException of(String lockName, long token, LossReason reason) {
        return new LeaseLostException(lockName, token, reason);
    }

    /**
     * The fencing token of the lease that was lost.
     *
     * @return the token
     */
    public long token() {
        return token;
    }

    /**
     * Why the lease was lost.
     *
     * @return the reason
     */
    public LossReason reason() {
        return reason;
    }
}
