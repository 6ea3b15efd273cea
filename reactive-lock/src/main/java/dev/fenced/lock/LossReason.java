package dev.fenced.lock;

/** Why a lease was lost. */
public enum LossReason {

    /**
     * The local validity deadline passed without a successful renewal (for example Redis could not be
     * reached). The lock may still exist in Redis for a short while, but the holder can no longer assume
     * that it holds it.
     */
    EXPIRED("its validity deadline passed without a successful renewal"),

    /**
     * Redis answered that the lock no longer holds this lease: its key expired on the server, was
     * deleted, or was taken over by another holder.
     */
    NOT_HELD("the lock service no longer holds it (expired there, deleted, or taken over)"),

    /** The client was closed while the lease was held; the lease was released on the way. */
    CLIENT_CLOSED("the lock client was closed"),

    /** Storage reported a newer fencing token for this lock than the lease's: another holder has written since. */
    SUPERSEDED("storage already holds a newer fencing token"),

    /**
     * The client reconnected to a lock service of another identity: Redis restarted, failed over to a replica
     * or reloaded older data ({@code run_id} or {@code master_replid} changed), so it may have lost the lock.
     * Every lease held on that server is lost at once, before a lease granted by the new one is emitted.
     */
    SERVER_CHANGED("the lock service restarted, failed over or lost its data (its run_id or replication id changed)"),

    /**
     * The lease reached its hold cap ({@link AcquireOptions#withMaxHold(java.time.Duration)}, or as moved by
     * {@link FencedLease#resetMaxHold(java.time.Duration)}): it was not renewed past the cap and was released
     * there, on purpose, while its holder still held it.
     */
    MAX_HOLD_REACHED("it reached its maximum hold time and was released"),

    /**
     * The client's scheduler rejected work while the client was open, so nothing could renew the lease: an
     * injected scheduler was disposed under the client. {@code StepVerifier.withVirtualTime} disposes its
     * scheduler when the verification ends, so a second verification on the same client hits this.
     */
    SCHEDULER_REJECTED("the client's scheduler rejected work, so nothing can renew it (an injected scheduler was "
            + "disposed; StepVerifier.withVirtualTime disposes its scheduler when the verification ends)");

    private final String description;

    LossReason(String description) {
        this.description = description;
    }

    /**
     * A human-readable explanation, used in exception messages.
     *
     * @return the explanation
     */
    public String description() {
        return description;
    }
}
