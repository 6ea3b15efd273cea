/**
 * ShedLock on Fenced: {@link dev.fenced.shedlock.FencedLockProvider} is a ShedLock
 * {@code ExtensibleLockProvider} over a {@link dev.fenced.lock.FencedLockClient}, so that an application moves
 * its {@code @SchedulerLock} jobs to Fenced's locks by replacing one bean.
 *
 * <p>ShedLock's API is blocking: every method here that talks to the lock service blocks the calling thread
 * until the service answered (bounded by the client's command timeout), and refuses to run on a Reactor
 * non-blocking thread. The lease of each run, with its fencing token, is reachable through
 * {@link dev.fenced.shedlock.FencedSimpleLock#lease()} and
 * {@link dev.fenced.shedlock.FencedLockProvider#currentLease(String)}.
 */
@NullMarked
package dev.fenced.shedlock;

import org.jspecify.annotations.NullMarked;
