package dev.fenced.lock;

import org.jspecify.annotations.Nullable;

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

    private LeaseLostException(String lockName, long token, LossReason reason, @Nullable Throwable cause) {
        super(lockName, "Lease on lock '" + lockName + "' with fencing token " + token + " was lost: "
                + reason.description(), cause);
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
        return new LeaseLostException(lockName, token, reason, null);
    }

    /**
     * Creates the exception for a lease lost because of {@code cause}, such as the
     * {@link StaleFencingTokenException} of a rejected write.
     *
     * @param lockName the lock name
     * @param token the fencing token of the lost lease
     * @param reason why it was lost
     * @param cause what revealed the loss
     * @return a new exception
     */
    public static LeaseLostException of(String lockName, long token, LossReason reason, Throwable cause) {
        return new LeaseLostException(lockName, token, reason, cause);
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
