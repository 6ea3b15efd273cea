package dev.fenced.lock;

import java.time.Duration;

/**
 * An acquire took the lock on the primary, but fewer replicas than
 * {@linkplain FencedLockClientBuilder#replicaAcknowledgement(int, Duration) required} acknowledged it in
 * time, so a failover could lose it. The acquire fails, and before this error is emitted the lock is
 * released again (an owner-checked release; if that fails too, its error is suppressed here and the lock
 * expires with its lease time). Retrying is safe. Immutable and thread-safe.
 */
public final class ReplicaAcknowledgementException extends FencedLockException {

    private static final long serialVersionUID = 1L;

    private final long acknowledged;
    private final int required;
    private final Duration timeout;

    private ReplicaAcknowledgementException(String lockName, long acknowledged, int required, Duration timeout) {
        super(lockName, "Acquire of lock '" + lockName + "' was acknowledged by " + acknowledged + " replica(s) within "
                + timeout.toMillis() + " ms, " + required + " required; the lock is released again", null);
        this.acknowledged = acknowledged;
        this.required = required;
        this.timeout = timeout;
    }

    /**
     * Creates the exception.
     *
     * @param lockName the lock name
     * @param acknowledged how many replicas acknowledged
     * @param required how many were required
     * @param timeout how long the client waited for them
     * @return a new exception
     */
    public static ReplicaAcknowledgementException of(String lockName, long acknowledged, int required, Duration timeout) {
        return new ReplicaAcknowledgementException(lockName, acknowledged, required, timeout);
    }

    /**
     * How many replicas acknowledged the acquire in time.
     *
     * @return the count
     */
    public long acknowledged() {
        return acknowledged;
    }

    /**
     * How many replicas were required.
     *
     * @return the count
     */
    public int required() {
        return required;
    }

    /**
     * How long the client waited for the replicas.
     *
     * @return the wait
     */
    public Duration timeout() {
        return timeout;
    }
}
