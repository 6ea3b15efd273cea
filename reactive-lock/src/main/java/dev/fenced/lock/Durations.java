package dev.fenced.lock;

import java.time.Duration;
import java.util.Objects;

/** Validation of durations, shared by the builder and the options so that messages are the same. */
final class Durations {

    static final Duration MIN_LEASE_TIME = Duration.ofMillis(10);

    private Durations() {
    }

    static Duration requireLeaseTime(Duration value, String what) {
        Objects.requireNonNull(value, () -> what + " must not be null");
        if (value.compareTo(MIN_LEASE_TIME) < 0 || value.compareTo(AcquireOptions.MAX_LEASE_TIME) > 0) {
            throw new IllegalArgumentException(what + " must be between 10 ms and 1 day, was " + value);
        }
        return value;
    }

    static Duration requireWait(Duration value, String what) {
        Objects.requireNonNull(value, () -> what + " must not be null");
        if (value.isNegative() || value.compareTo(AcquireOptions.MAX_WAIT) > 0) {
            throw new IllegalArgumentException(what + " must be between 0 and 1 day, was " + value);
        }
        return value;
    }

    static Duration requirePositive(Duration value, String what, Duration max) {
        Objects.requireNonNull(value, () -> what + " must not be null");
        if (value.isNegative() || value.isZero() || value.compareTo(max) > 0) {
            throw new IllegalArgumentException(what + " must be positive and at most " + max + ", was " + value);
        }
        return value;
    }
}
