package dev.fenced.demo;

import io.lettuce.core.RedisURI;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * How the two workers of the scenario lock and write; {@link ScenarioService} plays the same timeline with each:
 * {@link FencedArm} (Fenced's lease and a token-guarded write) and {@link PlainTtlArm} (a plain TTL lock and an
 * unguarded write, the seed's mistake).
 */
interface ScenarioArm {

    /** Whether this arm fences its writes; the report says so. */
    boolean fencing();

    /** Worker A's locks, on a Redis connection through {@code viaRelay}, with leases of {@code leaseTime}. */
    Mono<Locks> workerA(RedisURI viaRelay, Duration leaseTime);

    /** Worker B's locks: the application's own connection, with its default lease time. */
    Locks workerB();

    /**
     * Books the invoice as {@code seen} by {@code worker} once more, on {@code connection}, under {@code held}.
     * A fenced write fails with {@code StaleFencingTokenException} when a newer token has written the row.
     */
    Mono<Long> write(Connection connection, Held held, Invoice seen, String worker);

    /** One worker's way to take a lock. */
    interface Locks {

        /** Takes {@code name}, waiting up to {@code maxWait} while another worker holds it. */
        Mono<Held> acquire(String name, Duration maxWait);

        /** Releases what this worker's connection owns; idempotent. */
        Mono<Void> close();
    }

    /** A lock that a worker holds, or believes it holds. */
    interface Held {

        /** The fencing token, or {@code null} for a plain lock, which has none. */
        @Nullable Long token();

        /** How it was granted, for people: "with token 7" or "with SET NX PX, which gives no token". */
        String grant();

        /** Why the worker still sends its write, for people. */
        String beliefBeforeWrite();

        /** Emits a description if the worker's client learns that the lock is gone; a plain lock never does. */
        Mono<String> lost();

        /** Releases the lock; emits what happened, for people. */
        Mono<String> release();
    }
}
