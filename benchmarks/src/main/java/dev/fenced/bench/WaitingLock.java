package dev.fenced.bench;

import java.time.Duration;
import reactor.core.publisher.Mono;

/** A lock that can wait for a held name: what the contended workload drives. */
interface WaitingLock extends LockUnderTest {

    /**
     * Acquires {@code name}, waiting up to {@code maxWait} while another owner holds it, runs
     * {@code whileHeld} once it is held, then releases it.
     *
     * @param name the lock name
     * @param maxWait how long to wait at most
     * @param whileHeld called while the lock is held, on whatever thread the acquire completed
     * @return completes when released; errors if the lock was not acquired in time
     */
    Mono<Void> acquireWaitingThenRelease(String name, Duration maxWait, Runnable whileHeld);
}
