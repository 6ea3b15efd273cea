package dev.fenced.r2dbc;

import dev.fenced.lock.AmbiguousLeaseException;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.LeaseNotHeldException;
import dev.fenced.lock.StaleFencingTokenException;
import dev.fenced.lock.internal.KeyLayout;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/** What the fenced operations share about leases. */
final class Leases {

    private Leases() {
    }

    /**
     * Checks the name of a guarding lock by the rule of lock names, with the messages of {@code acquire}: a name that
     * no lease can have would make the spec refuse every lease.
     */
    static String requireGuard(@Nullable String lockName) {
        String problem = KeyLayout.problemWithName(lockName);
        if (!problem.isEmpty()) {
            throw new IllegalArgumentException(problem);
        }
        return Objects.requireNonNull(lockName);
    }

    /** Refuses, before any SQL, a lease that is no longer held. */
    static @Nullable LeaseNotHeldException notHeld(FencedLease lease) {
        Objects.requireNonNull(lease, "lease must not be null");
        return lease.isHeld() ? null : LeaseNotHeldException.of(lease.name(), lease.token());
    }

    /**
     * The lease that guards an operation, from the subscriber's Context: the lease on {@code guard} when the
     * operation names its lock, else the one lease of the Context. Decided before any SQL is sent.
     *
     * @param guard the name of the guarding lock, or {@code null} when the operation names none
     * @param what the operation, as the start of error messages
     * @return the lease; {@link IllegalStateException} when the Context holds no fitting lease,
     *     {@link dev.fenced.lock.AmbiguousLeaseException} when it holds several and none is named
     */
    static Mono<FencedLease> fromContext(@Nullable String guard, String what) {
        if (guard != null) {
            return FencedLease.current(guard).switchIfEmpty(Mono.error(() -> new IllegalStateException(what
                    + " is guarded by lock '" + guard + "', but the Reactor Context holds no lease on it: run it inside "
                    + "FencedLockClient.withLease(\"" + guard + "\", ...), or pass the lease")));
        }
        return FencedLease.current()
                .onErrorMap(AmbiguousLeaseException.class, e -> AmbiguousLeaseException.of(what, e.lockNames()))
                .switchIfEmpty(Mono.error(() -> new IllegalStateException(what + " needs a lease, and the Reactor Context "
                        + "holds none: run it inside FencedLockClient.withLease(...), or pass the lease")));
    }

    /**
     * Refuses, before any SQL, a lease of another lock than the one that guards the operation.
     *
     * @param lease the lease given
     * @param guard the guarding lock, or {@code null} when the operation names none
     * @param what the operation
     * @return the error, or {@code null} when the lease fits
     */
    static @Nullable IllegalArgumentException wrongLock(FencedLease lease, @Nullable String guard, String what) {
        if (guard == null || guard.equals(lease.name())) {
            return null;
        }
        return new IllegalArgumentException(what + " is guarded by lock '" + guard + "', but was given the lease on '"
                + lease.name() + "': tokens of different locks cannot be compared");
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

    /**
     * The error for a write rejected by a row that stores the token alone. A stored token equal to the lease's
     * cannot be told apart (a second write of this lease, or a token re-issued to another owner), so the lease is
     * only told when the stored token is higher.
     *
     * @param lease the lease that wrote
     * @param target what was written
     * @param storedToken the token storage holds
     * @return the error to emit
     */
    static StaleFencingTokenException rejectedByToken(FencedLease lease, String target, long storedToken) {
        StaleFencingTokenException rejection = StaleFencingTokenException.of(lease.name(), target, lease.token(),
                storedToken, null);
        if (storedToken > lease.token()) {
            lease.reportRejectedWrite(rejection);
        }
        return rejection;
    }
}
