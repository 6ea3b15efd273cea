package dev.fenced.lock;

import dev.fenced.lock.internal.LeaseContext;
import java.time.Duration;
import reactor.core.publisher.Mono;

/**
 * A held lease on a named lock, with its fencing token.
 *
 * <p>The {@linkplain #token() token} strictly increases with every grant of the same lock name, across
 * all clients. Carry it with every write the lease protects and let the storage reject a write whose
 * token is older than one it already accepted: that is what keeps data safe when a holder stalls past
 * its lease (garbage collection, CPU starvation, a network stall).
 *
 * <p>While held, the lease is renewed in the background. When it is lost, {@link #lost()} emits a
 * {@link LeaseLostException}; loss is never silent.
 *
 * <p>A lease that no code can reach any more (dropped by its subscriber, as the loser of
 * {@code Mono.firstWithSignal} drops it) is released once the garbage collector has collected this object: that
 * is bounded by the collector, not by a timer, and {@link FencedLockClientBuilder#maxHold(Duration)} stays the
 * hard bound. A {@code withLease} scope's Reactor Context, a subscriber of {@link #lost()} and a Mono that
 * {@link #release()} returned keep it reachable; code that keeps only the token does not.
 *
 * <p>Thread-safe. {@link #lost()} never signals on the thread that renews: a loss found by a renewal, a
 * release or a reconnect is signalled on the client's emission scheduler (by default Reactor's
 * {@code Schedulers.parallel()}); a loss the caller causes ({@link #reportRejectedWrite}, closing the client)
 * on the caller's thread, before the call returns. Keep work done there short and non-blocking.
 */
public interface FencedLease {

    /**
     * The lock name.
     *
     * @return the name
     */
    String name();

    /**
     * The fencing token: strictly increasing per lock name across all clients. With the default
     * {@link TokenScheme#SERVER_TIME} it is at least the lock service's time in microseconds at the grant, so
     * it stays above earlier tokens even after the service lost the lock's counter.
     *
     * @return the token, positive
     */
    long token();

    /**
     * The full identity of the lock in its lock service: the client's key prefix and the name, as the lock's
     * Redis key ({@code fenced:{invoice:42}}). Tokens are comparable only between leases with equal lock ids:
     * two key prefixes have two token counters. Fence tables key their rows by it.
     *
     * @return the lock id
     */
    String lockId();

    /**
     * The owner id of this grant: 32 lower-case hex digits, 128 bits of kernel entropy drawn for this
     * acquisition alone, so ids never repeat, also across processes restored from one snapshot (CRaC,
     * Lambda SnapStart). It is the owner the lock service stored with the grant, exactly: on Redis the lock
     * key's value is {@code ownerId:token}, on PostgreSQL the lease row's {@code owner} column; fenced storage
     * writes it beside the token, and a lease check ({@code FencedWrite.checkLease}) compares it with the row.
     * A lease reused by a nested scope is the enclosing grant: the same owner id, token and lock id.
     *
     * @return the owner id
     */
    String ownerId();

    /**
     * The lease time this lease was granted (and is renewed) with.
     *
     * @return the lease time
     */
    Duration leaseTime();

    /**
     * How long the lease stays valid without a further renewal, by the client's monotonic clock,
     * measured from before the last successful acquire or renewal was sent and less a clock-drift
     * allowance. Zero once lost or released.
     *
     * @return the remaining validity, never negative
     */
    Duration remainingValidity();

    /**
     * Whether the lease is held: not lost, not released, and its local validity deadline has not passed.
     *
     * @return {@code true} while held
     */
    boolean isHeld();

    /**
     * A hot signal of loss: emits one {@link LeaseLostException} (as a value, not an error) when the lease
     * is lost, or completes empty when the lease is released first. Late subscribers see the outcome.
     * Suitable for {@code takeUntilOther(lease.lost())}.
     *
     * @return the loss signal
     */
    Mono<LeaseLostException> lost();

    /**
     * Releases the lease: stops its renewal and deletes the lock in Redis if, and only if, it still holds
     * this lease (owner and token are both checked), then notifies waiters.
     *
     * <p>Cold: nothing happens until subscription. Idempotent: once a release has completed, every later
     * call emits the same outcome without I/O. A lease that was already lost is reported as
     * {@link ReleaseOutcome#NOT_HELD}, not as an error. Fails with {@link LockServiceException} only if
     * Redis could not be reached; the lease is then no longer renewed, a later call retries, and unless one
     * succeeds first, {@link #lost()} signals {@link LossReason#EXPIRED} at the lease's deadline.
     *
     * @return the outcome
     */
    Mono<ReleaseOutcome> release();

    /**
     * Releases the lease, but leaves the lock taken until {@code sinceGrant} has passed since the lease was
     * granted: renewal stops at once, and the remainder becomes the lock's expiry in the lock service
     * ({@code PEXPIRE} on Redis, {@code expires_at} from the database clock on PostgreSQL), which then frees it by
     * itself. Nothing renews it afterwards. The remainder is measured on the client's monotonic clock from when
     * the acquire's reply arrived, which is after the service's grant, and rounded up to whole milliseconds, so the
     * lock is never freed earlier than {@code sinceGrant} after the grant as the service counts it; it may stay
     * taken for up to the acquire's round trip longer. If that time has already passed, this is
     * {@link #release()}. Waiters of any client take the lock once it expires (their timers are bounded by its
     * remaining time; no release is notified, since none happens).
     *
     * <p>Emits {@link ReleaseOutcome#LEFT_TO_EXPIRE} when the lock was held and now expires at the end of the
     * tail, {@link ReleaseOutcome#RELEASED} when no tail was left (released at once), {@link ReleaseOutcome#NOT_HELD}
     * when the lease had already been lost, {@link ReleaseOutcome#RETAINED} for a nested view. Afterwards the
     * lease is not held ({@link #isHeld()} false, {@link #lost()} completed empty), {@link #release()} emits the
     * same outcome without I/O (so it cannot free the lock early), the client does not count it among its held
     * leases, and closing the client leaves the lock to expire. Cold, idempotent and fails as {@link #release()}
     * does. The tail is not bounded by a hold cap: asking for it is asking for the lock to stay taken. The tail waits
     * for a renewal of the lease in flight (so that no renewal sent earlier lands after it); closing the client
     * meanwhile waits for both, up to two command timeouts, and the returned {@code Mono} always terminates: past
     * that wait it fails as the tail's command does (the lock then expires with its last renewal).
     *
     * <p>The default implementation, for leases not made by this library, fails with
     * {@link UnsupportedOperationException}.
     *
     * @param sinceGrant how long after the grant the lock may be free at the earliest: zero or positive, at most
     *     {@link AcquireOptions#MAX_LEASE_TIME}
     * @return the outcome; {@link IllegalArgumentException} for a negative or too long duration
     */
    default Mono<ReleaseOutcome> releaseNoSoonerThan(Duration sinceGrant) {
        return Mono.error(new UnsupportedOperationException("releaseNoSoonerThan is not supported by " + getClass().getName()));
    }

    /**
     * Moves the lease's hold cap ({@link AcquireOptions#withMaxHold(Duration)}) to {@code fromNow} after now,
     * later or earlier, and renews the lease at once for no more than that, which also checks that the lock
     * service still holds it. A lease acquired without a cap gets one. From then on the lease behaves as a lease
     * acquired with that cap: renewals ask only for what is left of it, and at the cap the lease is released and
     * lost with {@link LossReason#MAX_HOLD_REACHED}. The new cap is measured from before the renewal was sent.
     *
     * <p>Cold. Emits {@code true} once the service extended the lease and the new cap is in force; {@code false},
     * changing nothing, when the lease is no longer held (released, lost, or found not held by the service, which
     * loses it with {@link LossReason#NOT_HELD}); fails with {@link LockServiceException} when the service could
     * not be reached (the lease and its old cap stay as they were). Emits on the client's emission scheduler (by
     * default {@code Schedulers.parallel()}), never on the thread that renews. A nested view moves the enclosing
     * lease's cap. Closing the client while it waits or is in flight ends it: with its reply if that came within
     * the close's wait for commands in flight, else with {@code false}.
     *
     * <p>The default implementation, for leases not made by this library, fails with
     * {@link UnsupportedOperationException}.
     *
     * @param fromNow the new cap, counted from now: at least 10 ms, at most {@link AcquireOptions#MAX_LEASE_TIME}
     * @return whether the cap was moved; {@link IllegalArgumentException} for a duration out of range
     */
    default Mono<Boolean> resetMaxHold(Duration fromNow) {
        return Mono.error(new UnsupportedOperationException("resetMaxHold is not supported by " + getClass().getName()));
    }

    /**
     * Tells the lease that storage rejected one of its writes. If storage holds a newer token for the lock
     * (or the same token from another owner), another holder has written since: the client's next acquire of
     * this name takes a token above the stored one (which restores progress when the lock service lost its
     * token counter), and the lease is lost at once, on the calling thread ({@link LossReason#SUPERSEDED}, with
     * {@code rejection} as the cause), so {@code withLease} cancels its work and fails with that
     * {@link LeaseLostException}. A rejection of a second write of the same lease under a strict rule changes
     * nothing. Fenced storage integrations call this on every rejected write.
     *
     * @param rejection the storage's rejection
     */
    void reportRejectedWrite(StaleFencingTokenException rejection);

    /**
     * The lease on {@code name} held by an enclosing
     * {@link FencedLockClient#withLease(String, java.util.function.Function) withLease} scope, read from the
     * subscriber's Reactor Context.
     *
     * @param name the lock name
     * @return the lease, or empty when no enclosing scope holds that lock
     */
    static Mono<FencedLease> current(String name) {
        return Mono.deferContextual(ctx -> Mono.justOrEmpty(LeaseContext.find(ctx, name)));
    }

    /**
     * The one lease held by the enclosing
     * {@link FencedLockClient#withLease(String, java.util.function.Function) withLease} scopes, read from the
     * subscriber's Reactor Context: for code that runs under a single lock. With nested scopes on several
     * locks it fails with {@link AmbiguousLeaseException} rather than guess: use {@link #current(String)}.
     *
     * @return the lease, or empty outside any scope; {@link AmbiguousLeaseException} when the Context holds
     *     leases on several locks
     */
    static Mono<FencedLease> current() {
        return Mono.deferContextual(ctx -> {
            java.util.List<FencedLease> all = LeaseContext.all(ctx);
            if (all.size() > 1) {
                return Mono.error(AmbiguousLeaseException.of("FencedLease.current()",
                        all.stream().map(FencedLease::name).toList()));
            }
            return Mono.justOrEmpty(all.isEmpty() ? null : all.get(0));
        });
    }
}
