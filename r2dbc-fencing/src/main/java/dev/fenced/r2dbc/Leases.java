package dev.fenced.r2dbc;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.LeaseNotHeldException;
import dev.fenced.lock.StaleFencingTokenException;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/** What the fenced operations share about leases. */
final class Leases {

    private Leases() {
    }

    /** Refuses, before any SQL, a lease that is no longer held. */
    static @Nullable LeaseNotHeldException notHeld(FencedLease lease) {
        Objects.requireNonNull(lease, "lease must not be null");
        return lease.isHeld() ? null : LeaseNotHeldException.of(lease.name(), lease.token());
    }

    /** The innermost lease of the subscriber's Context, or an error saying how to provide one. */
    static Mono<FencedLease> fromContext() {
        return FencedLease.current().switchIfEmpty(Mono.error(() -> new IllegalStateException(
                "No lease in the Reactor Context: run this inside FencedLockClient.withLease(...), or pass the lease")));
    }

    /**
     * The error for a rejected write, which the lease is told of; when storage holds a newer token from
     * another holder the lease is lost (inside {@code withLease}, the lease's loss then wins: the work fails with {@code LeaseLostException}
     * whose cause is this rejection).
     *
     * @param lease the lease that wrote
     * @param target what was written
     * @param storedToken the token storage holds
     * @param storedOwner the owner storage holds
     * @return the error to emit
     */
    static StaleFencingTokenException rejected(FencedLease lease, String target, long storedToken, @Nullable String storedOwner) {
        StaleFencingTokenException rejection = StaleFencingTokenException.of(lease.name(), target, lease.token(),
                lease.ownerId(), storedToken, storedOwner);
        lease.reportRejectedWrite(rejection);
        return rejection;
    }
}
