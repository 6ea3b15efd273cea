package dev.fenced.lock;

import java.util.function.IntSupplier;
import org.jspecify.annotations.Nullable;

/**
 * Receives what a lock client does, for metrics and tracing: set one with
 * {@link FencedLockClientBuilder#observer(LockObserver)}. {@link dev.fenced.lock.micrometer.MicrometerLockObserver}
 * is the Micrometer implementation; without an observer nothing is recorded.
 *
 * <p>Every method has an empty default. Implementations must be thread-safe, fast and non-blocking: they
 * are called on the threads where the events happen (driver I/O threads, the renewal scheduler, the
 * caller's thread).
 */
public interface LockObserver {

    /** An observer that records nothing. */
    LockObserver NONE = new LockObserver() {
    };

    /**
     * An acquire was subscribed to (a nested acquire that reuses an enclosing lease is not reported).
     *
     * @param name the lock name
     * @return the handle told how the acquire ended
     */
    default AcquireObservation acquireStarted(String name) {
        return AcquireObservation.NONE;
    }

    /**
     * One renewal round trip extended {@code count} leases.
     *
     * @param count the leases renewed
     */
    default void leasesRenewed(int count) {
    }

    /**
     * One renewal round trip for {@code count} leases failed (they are retried until their deadlines).
     *
     * @param count the leases whose renewal failed
     */
    default void renewalFailed(int count) {
    }

    /**
     * A held lease was lost.
     *
     * @param name the lock name
     * @param reason why
     */
    default void leaseLost(String name, LossReason reason) {
    }

    /**
     * Storage rejected a write of a lease of this client (a {@link StaleFencingTokenException}).
     *
     * @param name the lock name
     */
    default void writeRejected(String name) {
    }

    /**
     * A {@linkplain FencedLockClient#forceRelease(String, String) force-release} ended.
     *
     * @param name the lock name
     * @param outcome whether a holder's lock was broken
     * @param reason the reason given for it
     */
    default void forceReleased(String name, ForceReleaseResult.Outcome outcome, String reason) {
    }

    /**
     * A {@linkplain FencedLockClient#locks(String) fleet view} was read to its end (not cancelled, not failed).
     *
     * @param count how many held locks it listed
     */
    default void fleetListed(long count) {
    }

    /**
     * Called once when the client is built, with a live count of the leases it holds.
     *
     * @param heldLeases the number of held leases, read when a gauge is sampled
     */
    default void heldLeases(IntSupplier heldLeases) {
    }

    /**
     * A tick of a job started ({@link FencedLockClient#runJob(FencedJob, java.util.function.Supplier)}), before its
     * acquire.
     *
     * @param job the job's name
     * @return the handle told how the tick ended
     */
    default JobObservation jobStarted(String job) {
        return JobObservation.NONE;
    }

    /** How an acquire ended. */
    enum AcquireOutcome {
        /** A lease was emitted. */
        ACQUIRED,
        /** A single attempt found the lock held and completed empty. */
        BUSY,
        /** The maximum wait ran out ({@link LockAcquireTimeoutException}). */
        TIMED_OUT,
        /** Any other error (the lock service failed, the client is closed, bad input). */
        FAILED,
        /** The subscriber cancelled before an outcome. */
        CANCELLED
    }

    /** The end of one observed tick of a job. */
    @FunctionalInterface
    interface JobObservation {

        /** A handle that records nothing. */
        JobObservation NONE = outcome -> {
        };

        /**
         * The tick ended with an outcome.
         *
         * @param outcome how
         */
        void ended(JobOutcome outcome);

        /** The tick was cancelled before it had an outcome (its subscriber left, as a stopping schedule does). */
        default void cancelled() {
        }
    }

    /** The end of one observed acquire. */
    @FunctionalInterface
    interface AcquireObservation {

        /** A handle that records nothing. */
        AcquireObservation NONE = (outcome, error) -> {
        };

        /**
         * The acquire ended.
         *
         * @param outcome how
         * @param error the error, for {@link AcquireOutcome#TIMED_OUT} and {@link AcquireOutcome#FAILED}
         */
        void ended(AcquireOutcome outcome, @Nullable Throwable error);
    }
}
