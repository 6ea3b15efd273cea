package dev.fenced.shedlock;

import dev.fenced.lock.FencedLease;
import net.javacrumbs.shedlock.core.SimpleLock;

/**
 * A ShedLock lock taken by {@link FencedLockProvider}: a {@link SimpleLock} that also gives the Fenced lease
 * behind it, so that the job can carry the lease's fencing token with its writes (for example
 * {@code FencedWrite.update(connectionFactory, lock.lease())} in r2dbc-fencing).
 *
 * <p>The ShedLock contract holds as ShedLock states it: after {@link #unlock()} or {@link #extend} this object
 * must not be used again (both then throw {@link IllegalStateException}); a successful extend returns a new lock
 * over the same lease (same token). Not meant to be shared between threads without synchronization, as ShedLock's
 * own locks are not.
 */
public interface FencedSimpleLock extends SimpleLock {

    /**
     * The lease this lock holds: the lock name (as mapped by the provider), the fencing token, and the lease's
     * state ({@link FencedLease#isHeld()}, {@link FencedLease#lost()}). The lease stays the same across
     * {@link #extend}; after {@link #unlock()} it is no longer held.
     *
     * @return the lease, never {@code null}
     */
    FencedLease lease();
}
