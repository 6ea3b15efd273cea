package dev.fenced.shedlock;

import dev.fenced.lock.FencedLease;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import net.javacrumbs.shedlock.support.LockException;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/** Waits for a lock client's Mono on the calling thread, which ShedLock's API requires. */
final class Blocking {

    private Blocking() {
    }

    /**
     * Fails at once on a Reactor non-blocking thread: waiting there would stall every task of that thread, and
     * the answer may be due on that very thread.
     */
    static void refuseNonBlockingThread(String operation, String lockName) {
        if (Schedulers.isInNonBlockingThread()) {
            throw new IllegalStateException("FencedLockProvider " + operation + " of lock '" + lockName
                    + "' blocks and cannot run on the non-blocking thread " + Thread.currentThread().getName()
                    + "; run ShedLock jobs on a scheduler thread or Schedulers.boundedElastic()");
        }
    }

    /**
     * Subscribes to an acquire and waits for its lease. An error is rethrown as it is when unchecked; an interrupt
     * cancels the attempt (the client undoes what it took), restores the interrupt flag and fails with
     * {@link LockException}. When the attempt had already been granted as the interrupt arrived, so that it can no
     * longer be cancelled, the granted lease is released before the exception is thrown: it is never dropped held.
     */
    static @Nullable FencedLease awaitAcquire(Mono<FencedLease> acquire, String lockName) {
        CompletableFuture<FencedLease> attempt = acquire.toFuture();
        try {
            return attempt.get();
        } catch (InterruptedException e) {
            cancelOrRelease(attempt);
            Thread.currentThread().interrupt();
            throw new LockException("Interrupted during lock of lock '" + lockName + "'", e);
        } catch (ExecutionException e) {
            throw rethrow(e, "lock", lockName);
        } catch (CancellationException e) {
            throw new LockException("Cancelled lock of lock '" + lockName + "'", e);
        }
    }

    /**
     * Cancels an acquire attempt; if it cannot be cancelled because it completed with a lease, releases that
     * lease and waits for the release (uninterruptibly, so that the lock is free when this returns).
     *
     * @return whether a granted lease had to be released
     */
    static boolean cancelOrRelease(CompletableFuture<FencedLease> attempt) {
        if (attempt.cancel(true) || attempt.isCompletedExceptionally()) {
            return false;
        }
        FencedLease late = attempt.getNow(null);
        if (late == null) {
            return false; // completed empty: nothing was taken
        }
        boolean interrupted = Thread.interrupted();
        try {
            awaitUninterruptibly(late.release(), "lock", late.name());
        } catch (RuntimeException releaseFailed) {
            // The lease is no longer renewed; it expires at its lease time at the latest.
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
        return true;
    }

    /**
     * Subscribes and waits for the outcome. An error is rethrown as it is when unchecked; an interrupt cancels the
     * subscription (the client undoes what it took), restores the interrupt flag and fails with
     * {@link LockException}.
     */
    static <T> @Nullable T await(Mono<T> mono, String operation, String lockName) {
        CompletableFuture<T> future = mono.toFuture();
        try {
            return future.get();
        } catch (InterruptedException e) {
            future.cancel(true);
            Thread.currentThread().interrupt();
            throw new LockException("Interrupted during " + operation + " of lock '" + lockName + "'", e);
        } catch (ExecutionException e) {
            throw rethrow(e, operation, lockName);
        } catch (CancellationException e) {
            throw new LockException("Cancelled " + operation + " of lock '" + lockName + "'", e);
        }
    }

    /**
     * Subscribes and waits for the outcome; an interrupt meanwhile does not end the wait, and the interrupt flag
     * is restored afterwards. Errors are rethrown as {@link #await} does.
     */
    static <T> @Nullable T awaitUninterruptibly(Mono<T> mono, String operation, String lockName) {
        CompletableFuture<T> future = mono.toFuture();
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return future.get();
                } catch (InterruptedException e) {
                    interrupted = true;
                } catch (ExecutionException e) {
                    throw rethrow(e, operation, lockName);
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private static RuntimeException rethrow(ExecutionException e, String operation, String lockName) {
        Throwable cause = e.getCause();
        if (cause instanceof RuntimeException runtime) {
            return runtime;
        }
        if (cause instanceof Error error) {
            throw error;
        }
        return new LockException("Failed " + operation + " of lock '" + lockName + "'", cause);
    }
}
