package dev.fenced.shedlock;

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
            Throwable cause = e.getCause();
            if (cause instanceof RuntimeException runtime) {
                throw runtime;
            }
            if (cause instanceof Error error) {
                throw error;
            }
            throw new LockException("Failed " + operation + " of lock '" + lockName + "'", cause);
        } catch (CancellationException e) {
            throw new LockException("Cancelled " + operation + " of lock '" + lockName + "'", e);
        }
    }
}
