package dev.fenced.bench;

import reactor.core.publisher.Mono;

/** A lock implementation the harness drives: one acquire (a single attempt) and its release. */
interface LockUnderTest extends AutoCloseable {

    /** The name in result tables. */
    String label();

    /**
     * One acquire+release pair on a free lock.
     *
     * @param name the lock name
     * @return completes when released; errors if the lock was not acquired
     */
    Mono<Void> pair(String name);

    @Override
    void close();
}
