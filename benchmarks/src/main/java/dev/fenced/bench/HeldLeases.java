package dev.fenced.bench;

import reactor.core.publisher.Mono;

/**
 * A client that takes many leases and keeps them alive with its own renewal until told to release them:
 * what the held-leases workload drives. Created inside the workload, so that the threads and heap it adds
 * are counted.
 */
interface HeldLeases extends AutoCloseable {

    /** The name in result tables. */
    String label();

    /**
     * One attempt on a free name; the lease is kept, and renewed, until {@link #releaseAll()}.
     *
     * @param name the lock name
     * @return completes when held; errors if it was not
     */
    Mono<Void> acquire(String name);

    /** How many of the acquired leases are no longer held (checked after the measured window). */
    Mono<Long> countLost();

    /** Releases every acquired lease. */
    Mono<Void> releaseAll();

    @Override
    void close();
}
