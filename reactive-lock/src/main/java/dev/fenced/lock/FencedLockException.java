package dev.fenced.lock;

import org.jspecify.annotations.Nullable;

/**
 * Base class of every error that Fenced emits. Each subclass carries the data of its failure
 * (lock name, token, wait time) as fields, so code never needs to parse a message.
 *
 * <p>Instances are immutable and thread-safe.
 */
public abstract class FencedLockException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private final String lockName;

    /**
     * For subclasses, here and in the modules that build on the lock client (such as r2dbc-fencing).
     *
     * @param lockName the lock name, or the empty string
     * @param message the message
     * @param cause the cause, or {@code null}
     */
    protected FencedLockException(String lockName, String message, @Nullable Throwable cause) {
        super(message, cause);
        this.lockName = lockName;
    }

    /**
     * The name of the lock the failure concerns, or the empty string when it concerns no single lock
     * (for example a closed client).
     *
     * @return the lock name, never {@code null}
     */
    public String lockName() {
        return lockName;
    }
}
