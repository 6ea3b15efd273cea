package dev.fenced.lock.internal.redis;

import java.time.Duration;
import java.util.Objects;

/**
 * How many replicas must acknowledge an acquire ({@code WAIT}), and for how long to wait for them.
 *
 * @param replicas the number of replicas, 0 for none
 * @param timeout how long {@code WAIT} may block
 */
public record ReplicaAcks(int replicas, Duration timeout) {

    /** No acknowledgement required: an acquire is done when the primary answers. */
    public static final ReplicaAcks NONE = new ReplicaAcks(0, Duration.ZERO);

    /** Validates. */
    public ReplicaAcks {
        Objects.requireNonNull(timeout, "timeout");
        if (replicas < 0) {
            throw new IllegalArgumentException("replicas must not be negative, was " + replicas);
        }
    }

    /**
     * Whether an acquire waits for replicas.
     *
     * @return whether at least one replica must acknowledge
     */
    public boolean required() {
        return replicas > 0;
    }
}
