package dev.fenced.lock;

import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * What {@link FencedLockClient#forceRelease(String, String)} did: a typed outcome, also when the lock was not
 * held (that is not an error: a second force-release of the same lock answers {@link Outcome#NOT_HELD}).
 *
 * @param name the lock name
 * @param outcome whether a holder's lock was broken
 * @param token the broken holder's fencing token (the next grant's token is above it); 0 when nothing was held
 * @param holderLabel the broken holder's label, or {@code null} when it had none or nothing was held
 * @param reason the reason given by whoever broke it, as logged and observed
 */
public record ForceReleaseResult(String name, Outcome outcome, long token, @Nullable String holderLabel, String reason) {

    /** Validates. */
    public ForceReleaseResult {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(outcome, "outcome");
        Objects.requireNonNull(reason, "reason");
    }

    /** Whether a lock was broken. */
    public enum Outcome {

        /**
         * The lock was held and is now deleted, and the name's token counter is at least the broken token: the
         * broken holder's lease is lost ({@link LossReason#NOT_HELD}) at its next renewal at the latest, and the
         * next grant's token is above the broken one.
         */
        RELEASED,

        /** The lock was not held (free, expired, or already broken): nothing changed. */
        NOT_HELD
    }
}
