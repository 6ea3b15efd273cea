package dev.fenced.lock;

import org.jspecify.annotations.Nullable;

/**
 * The lock service (Redis or Valkey) could not be used: it is unreachable, did not answer within the
 * command timeout, or answered with an error. The message says which operation failed; the cause is
 * the driver's exception. Immutable and thread-safe.
 *
 * <p>For an acquire this means the lease is not held. An attempt that may have reached the server is undone
 * by one owner-checked release sent at once; if that cannot get through either, the lock expires with its
 * lease time.
 */
public final class LockServiceException extends FencedLockException {

    private static final long serialVersionUID = 1L;

    private final String operation;

    private LockServiceException(String lockName, String operation, String detail, @Nullable Throwable cause) {
        super(lockName, "Lock service failed to " + operation
                + (lockName.isEmpty() ? "" : " for lock '" + lockName + "'") + ": " + detail, cause);
        this.operation = operation;
    }

    /**
     * Creates the exception.
     *
     * @param lockName the lock name, or the empty string when the operation concerns several locks
     * @param operation what was attempted, such as {@code "acquire"} or {@code "renew 3 leases"}
     * @param detail what went wrong
     * @param cause the driver's exception, if any
     * @return a new exception
     */
    public static LockServiceException of(String lockName, String operation, String detail, @Nullable Throwable cause) {
        return new LockServiceException(lockName, operation, detail, cause);
    }

    /**
     * What was attempted, such as {@code "acquire"}.
     *
     * @return the operation
     */
    public String operation() {
        return operation;
    }
}
