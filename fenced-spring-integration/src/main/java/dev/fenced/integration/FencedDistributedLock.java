package dev.fenced.integration;

import dev.fenced.lock.FencedLease;
import org.springframework.integration.support.locks.DistributedLock;

/**
 * A lock of {@link FencedLockRegistry}: a Spring Integration {@link DistributedLock} that also gives the Fenced
 * lease behind it while the current thread holds it, so that the guarded work can carry the lease's fencing
 * token with its writes (for example {@code FencedWrite.update(connectionFactory, lock.lease())} in
 * r2dbc-fencing).
 *
 * <p>Thread-safe, with per-thread ownership as {@link java.util.concurrent.locks.ReentrantLock} has: the thread
 * that locked it owns it, may lock it again (each lock needs one unlock), and alone may unlock it.
 */
public interface FencedDistributedLock extends DistributedLock {

    /**
     * The lease of this lock, held for the current thread: its lock name, fencing token and state
     * ({@link FencedLease#isHeld()}, {@link FencedLease#lost()}). One lease serves all nested holds of the owning
     * thread. Does not block.
     *
     * @return the lease
     * @throws IllegalStateException if the current thread does not hold this lock
     */
    FencedLease lease();
}
