package dev.fenced.integration;

import dev.fenced.lock.FencedLease;
import java.time.Duration;
import org.springframework.integration.support.locks.DistributedLock;

/**
 * A lock of {@link FencedLockRegistry}: a Spring Integration {@link DistributedLock} that also gives the Fenced
 * lease behind it while the current thread holds it, so that the guarded work can carry the lease's fencing
 * token with its writes (for example {@code FencedWrite.update(connectionFactory, lock.lease())} in
 * r2dbc-fencing).
 *
 * <p>Thread-safe, with per-thread ownership as {@link java.util.concurrent.locks.ReentrantLock} has: the thread
 * that locked it owns it, may lock it again (each lock needs one unlock), and alone may unlock it. A nested hold
 * checks with the lock service that the lease is still held (see {@link FencedLockRegistry}).
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

    /**
     * As {@link #lock()}, with {@code ttl} as the lease time of the lease this hold takes (a nested hold keeps the
     * lease it has). The lease is renewed every third of it while held. {@code ttl} must be longer than the
     * client's command timeout, which is 5 s on a default client: a ttl of 5 s or less fails there with the
     * client's {@link IllegalArgumentException}, as does one too short for the renewal period plus that timeout.
     *
     * @param ttl the lease time, at most one day
     * @throws IllegalArgumentException if the client refuses {@code ttl}
     */
    @Override
    void lock(Duration ttl);

    /**
     * As {@link #tryLock(long, java.util.concurrent.TimeUnit)}, waiting at most {@code waitTime}, with
     * {@code ttl} as the lease time of the lease this hold takes (a nested hold keeps the lease it has). The
     * floor of {@link #lock(Duration)} applies: on a default client a ttl of 5 s or less (not longer than the
     * command timeout) fails with the client's {@link IllegalArgumentException}.
     *
     * @param waitTime how long to wait at most; zero or negative for one attempt
     * @param ttl the lease time, at most one day
     * @return whether the lock was taken
     * @throws InterruptedException if interrupted while waiting; nothing is then held
     * @throws IllegalArgumentException if the client refuses {@code ttl}
     */
    @Override
    boolean tryLock(Duration waitTime, Duration ttl) throws InterruptedException;
}
