package dev.fenced.lock.internal;

import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * Hands a lock that a lease of this client releases to the client's next waiter for it, so that the release and
 * the next grant are one store call ({@link LeaseStore#handOff}) instead of a release, a notification and an
 * acquire.
 */
interface Handoffs {

    /** No hand-offs: every release is a plain release. */
    Handoffs NONE = releasing -> null;

    /**
     * Offers the lock of a releasing lease to the next waiter of this client.
     *
     * @param releasing the lease being released
     * @return whether the releasing lease held the lock, once the store has answered, if a waiter took the lock
     *     over; {@code null} if none did (then release as usual)
     */
    @Nullable Mono<Boolean> handOff(HeldLease releasing);
}
