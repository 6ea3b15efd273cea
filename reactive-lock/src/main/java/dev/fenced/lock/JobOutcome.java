package dev.fenced.lock;

import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import org.jspecify.annotations.Nullable;

/**
 * How one tick of a {@link FencedJob} ended: what {@link FencedLockClient#runJob(FencedJob, java.util.function.Supplier)}
 * emits. A tick never fails with an error; its outcome says what happened. Immutable and thread-safe.
 */
public final class JobOutcome {

    /** What a tick did. */
    public enum Status {

        /** The job ran to its end under the lock; {@link #token()} and {@link #duration()} say under which grant and how long. */
        RAN,

        /**
         * The job did not run: the lock was held elsewhere (by another instance, or by a tick of the same job still
         * running in this client, or by an enclosing scope of the caller), also after {@link FencedJob#maxWait()}.
         * {@link #reason()} says which.
         */
        SKIPPED,

        /**
         * The job ran and failed with {@link #error()}. The lock was released at once, or, with a lockAtLeastFor,
         * left to expire at its end.
         */
        FAILED,

        /**
         * The lease was lost while the job ran (expired, taken over, superseded, the client closed...): the job was
         * cancelled; {@link #error()} is the {@link LeaseLostException}.
         */
        LOST,

        /**
         * The job ran until lockAtMostFor and was cancelled there; the lock was released. {@link #error()} is the
         * {@link LeaseLostException} with {@link LossReason#MAX_HOLD_REACHED}.
         */
        CUT_OFF,

        /**
         * The job did not run: the lock service could not be reached, or the client is closed; {@link #error()} is
         * why. The schedule goes on: the next tick tries again.
         */
        UNAVAILABLE
    }

    private final String job;
    private final Status status;
    private final long token;
    private final Duration duration;
    private final @Nullable Throwable error;
    private final String reason;

    private JobOutcome(String job, Status status, long token, Duration duration, @Nullable Throwable error, String reason) {
        this.job = Objects.requireNonNull(job, "job must not be null");
        this.status = status;
        this.token = token;
        this.duration = Objects.requireNonNull(duration, "duration must not be null");
        this.error = error;
        this.reason = Objects.requireNonNull(reason, "reason must not be null");
    }

    /**
     * The job ran to its end.
     *
     * @param job the job's name
     * @param token the fencing token it ran under
     * @param duration how long it ran
     * @return the outcome
     */
    public static JobOutcome ran(String job, long token, Duration duration) {
        return new JobOutcome(job, Status.RAN, token, duration, null, "");
    }

    /**
     * The job did not run because the lock was held.
     *
     * @param job the job's name
     * @param reason by whom, for logs
     * @return the outcome
     */
    public static JobOutcome skipped(String job, String reason) {
        return new JobOutcome(job, Status.SKIPPED, 0, Duration.ZERO, null, reason);
    }

    /**
     * The job ran and failed.
     *
     * @param job the job's name
     * @param token the fencing token it ran under
     * @param duration how long it ran
     * @param error its error
     * @return the outcome
     */
    public static JobOutcome failed(String job, long token, Duration duration, Throwable error) {
        return new JobOutcome(job, Status.FAILED, token, duration, error, "the job failed: " + error);
    }

    /**
     * The lease was lost while the job ran: {@link Status#CUT_OFF} for {@link LossReason#MAX_HOLD_REACHED}, else
     * {@link Status#LOST}.
     *
     * @param job the job's name
     * @param duration how long it ran
     * @param loss the loss
     * @return the outcome
     */
    public static JobOutcome lost(String job, Duration duration, LeaseLostException loss) {
        Status status = loss.reason() == LossReason.MAX_HOLD_REACHED ? Status.CUT_OFF : Status.LOST;
        return new JobOutcome(job, status, loss.token(), duration, loss, loss.getMessage());
    }

    /**
     * The job did not run: the lock service could not be asked.
     *
     * @param job the job's name
     * @param error why
     * @return the outcome
     */
    public static JobOutcome unavailable(String job, Throwable error) {
        return new JobOutcome(job, Status.UNAVAILABLE, 0, Duration.ZERO, error, "the lock could not be taken: " + error);
    }

    /**
     * The job's name (its lock name).
     *
     * @return the name
     */
    public String job() {
        return job;
    }

    /**
     * What the tick did.
     *
     * @return the status
     */
    public Status status() {
        return status;
    }

    /**
     * Whether the job ran to its end.
     *
     * @return whether the status is {@link Status#RAN}
     */
    public boolean ran() {
        return status == Status.RAN;
    }

    /**
     * The fencing token the job ran under; 0 when it did not run.
     *
     * @return the token
     */
    public long token() {
        return token;
    }

    /**
     * How long the job ran, from the grant to its end (on the client's clock); zero when it did not run.
     *
     * @return the duration
     */
    public Duration duration() {
        return duration;
    }

    /**
     * The error of a {@link Status#FAILED}, {@link Status#LOST}, {@link Status#CUT_OFF} or {@link Status#UNAVAILABLE}
     * tick.
     *
     * @return the error, or empty
     */
    public Optional<Throwable> error() {
        return Optional.ofNullable(error);
    }

    /**
     * Why the job did not run or did not end normally, for logs; empty for {@link Status#RAN}.
     *
     * @return the reason
     */
    public String reason() {
        return reason;
    }

    @Override
    public String toString() {
        return "JobOutcome{job='" + job + "', status=" + status + (token != 0 ? ", token=" + token : "")
                + (duration.isZero() ? "" : ", duration=" + duration) + (reason.isEmpty() ? "" : ", reason=" + reason) + "}";
    }
}
