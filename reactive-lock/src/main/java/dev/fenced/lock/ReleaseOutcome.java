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
    RETAINED
}
