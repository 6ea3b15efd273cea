package dev.fenced.lock;

/** What {@link FencedLease#release()} found. */
public enum ReleaseOutcome {

    /** The lease was held and is now released; waiters were notified. */
    RELEASED,

    /**
     * The lease had already been lost (expired, deleted or taken over) before the release; nothing of
     * another holder was touched. {@link FencedLease#lost()} has signalled the loss.
     */
    NOT_HELD,

    /**
     * The lease belongs to an enclosing scope (a nested acquire of a lock that the current Reactor
     * Context already holds); it stays held until that scope releases it.
     */
    RETAINED,

    /**
     * The lease was held; it is no longer renewed, and the lock stays taken in the lock service until the time
     * asked of {@link FencedLease#releaseNoSoonerThan(java.time.Duration)} has passed since the grant (its
     * remainder is the lock's expiry there), then frees itself. The lease counts as released from then on:
     * {@link FencedLease#isHeld()} is false, {@link FencedLease#lost()} has completed empty, the client no longer
     * counts it among its held leases, and closing the client does not free the lock early.
     */
    LEFT_TO_EXPIRE
}
