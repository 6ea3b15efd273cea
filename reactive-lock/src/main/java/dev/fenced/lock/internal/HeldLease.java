package dev.fenced.lock.internal;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.LossReason;
import dev.fenced.lock.ReleaseOutcome;
import dev.fenced.lock.StaleFencingTokenException;
import java.lang.ref.WeakReference;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * A lease granted to this client. Its state moves once from {@code HELD} to {@code LOST} or through
 * {@code RELEASING} to {@code RELEASED}; transitions are atomic, so a renewal reply and a release racing
 * each other cannot both win. Thread-safe.
 */
final class HeldLease implements FencedLease {

    private static final Logger log = Loggers.getLogger(HeldLease.class);

    enum State { HELD, RELEASING, RELEASED, LOST }

    private final LeaseRuntime runtime;
    private final Renewer renewer;
    private final LeaseRegistry registry;
    private final Handoffs handoffs;
    private final String name;
    private final String owner;
    private final long token;
    private final long leaseNanos;
    private final long renewEveryNanos;
    private final long grantedAt;
    private final AtomicReference<State> state = new AtomicReference<>(State.HELD);
    private final Sinks.One<LeaseLostException> lost = Sinks.one();
    private final AtomicReference<Sinks.@Nullable One<ReleaseOutcome>> release = new AtomicReference<>();
    private volatile long deadline;
    private volatile @Nullable LeaseLostException loss;
    private volatile boolean frozen;
    private volatile WeakReference<LeaseHandle> handle = new WeakReference<>(null);

    // Confined to the renewer's worker, which sees the constructor's values through Renewer.track; the
    // acquiring thread reads renewAt there too, before the worker can change it. dueAt and heapSlot are the
    // lease's key and place in the renewer's heap (heapSlot -1: not in it).
    boolean renewing;
    boolean retrying;
    long renewAt;
    long dueAt;
    long holdUntil;
    boolean bounded;
    int heapSlot = -1;
    // The hold cap (AcquireOptions.withMaxHold): capped and capAt are set before the lease is tracked and then
    // only by the worker; capLimited says that the last renewal (or the acquire) asked for the rest of the cap
    // only, so that nothing renews the lease again and it ends at its deadline or the cap, whichever comes first.
    boolean capped;
    long capAt;
    boolean capLimited;
    // Tasks that wait for the renewal in flight to end (Renewer.settled, moveCap); confined to the worker.
    java.util.@Nullable List<Runnable> whenSettled;

    HeldLease(LeaseRuntime runtime, Renewer renewer, LeaseRegistry registry, Handoffs handoffs, String name, String owner,
            long token, long leaseNanos, long renewEveryNanos, long deadline, long renewAt, long grantedAt) {
        this.runtime = runtime;
        this.renewer = renewer;
        this.registry = registry;
        this.handoffs = handoffs;
        this.name = name;
        this.owner = owner;
        this.token = token;
        this.leaseNanos = leaseNanos;
        this.renewEveryNanos = renewEveryNanos;
        this.deadline = deadline;
        this.renewAt = renewAt;
        this.grantedAt = grantedAt;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public long token() {
        return token;
    }

    @Override
    public String lockId() {
        return runtime.keys().lockKey(name);
    }

    @Override
    public String ownerId() {
        return owner;
    }

    @Override
    public Duration leaseTime() {
        return Duration.ofNanos(leaseNanos);
    }

    @Override
    public Duration remainingValidity() {
        if (state.get() != State.HELD) {
            return Duration.ZERO;
        }
        long left = deadline - runtime.now();
        return left > 0 ? Duration.ofNanos(left) : Duration.ZERO;
    }

    @Override
    public boolean isHeld() {
        return state.get() == State.HELD && deadline - runtime.now() > 0;
    }

    @Override
    public Mono<LeaseLostException> lost() {
        return lost.asMono();
    }

    @Override
    public Mono<ReleaseOutcome> release() {
        return end(0, null);
    }

    /**
     * As {@link #release()}, with the store's owner-checked release sent through {@code call}, so that the releases
     * of a batch share one store call ({@link BatchedReleases}). A hand-off to a waiter of this client is still a call
     * of its own. The request, if any, is handed to {@code call} while the returned Mono is subscribed.
     *
     * @param call the batch's store call
     * @return the outcome
     */
    Mono<ReleaseOutcome> release(BatchedReleases call) {
        return end(0, call);
    }

    @Override
    public Mono<ReleaseOutcome> releaseNoSoonerThan(Duration sinceGrant) {
        if (sinceGrant == null) {
            return Mono.error(new NullPointerException("sinceGrant must not be null"));
        }
        if (sinceGrant.isNegative() || sinceGrant.compareTo(MAX_TAIL) > 0) {
            return Mono.error(new IllegalArgumentException("sinceGrant must be between 0 and 1 day, was " + sinceGrant));
        }
        return end(sinceGrant.toNanos(), null);
    }

    @Override
    public Mono<Boolean> resetMaxHold(Duration fromNow) {
        if (fromNow == null) {
            return Mono.error(new NullPointerException("fromNow must not be null"));
        }
        if (fromNow.compareTo(MIN_CAP) < 0 || fromNow.compareTo(MAX_TAIL) > 0) {
            return Mono.error(new IllegalArgumentException("fromNow must be between 10 ms and 1 day, was " + fromNow));
        }
        Mono<Boolean> moved = renewer.moveCap(this, fromNow.toNanos());
        return moved.publishOn(runtime.settings().lossScheduler());
    }

    private static final Duration MAX_TAIL = Duration.ofDays(1);
    private static final Duration MIN_CAP = Duration.ofMillis(10);

    /**
     * The one way a release ends, plain ({@code keepNanos} 0) or with a tail: its outcome is made once, and every
     * later call of either kind emits it.
     */
    private Mono<ReleaseOutcome> end(long keepNanos, @Nullable BatchedReleases call) {
        return Mono.defer(() -> {
            Sinks.One<ReleaseOutcome> existing = release.get();
            if (existing != null) {
                return existing.asMono();
            }
            Sinks.One<ReleaseOutcome> mine = Sinks.one();
            if (!release.compareAndSet(null, mine)) {
                Sinks.One<ReleaseOutcome> winner = release.get();
                return winner != null ? winner.asMono() : end(keepNanos, call);
            }
            // The release runs to its end even if this subscriber cancels, so that its outcome is known.
            doRelease(keepNanos, call).subscribe(mine::tryEmitValue, error -> {
                release.set(null); // a later call may retry
                expireAtDeadlineIfStillReleasing();
                mine.tryEmitError(error);
            });
            return mine.asMono();
        });
    }

    private Mono<ReleaseOutcome> doRelease(long keepNanos, @Nullable BatchedReleases call) {
        State s = state.get();
        if (s == State.HELD && !state.compareAndSet(State.HELD, State.RELEASING)) {
            s = state.get();
        }
        if (s == State.HELD || s == State.RELEASING) {
            renewer.forget(this);
            if (keepNanos > 0 && grantedAt + keepNanos - runtime.now() > 0) {
                return leaveToExpire(grantedAt + keepNanos);
            }
            // A waiter of this client takes the lock over in the same store call, or the lock is released to all.
            Mono<Boolean> handedOff = handoffs.handOff(this);
            return (handedOff != null ? expiringAtDeadline(handedOff) : releaseInStore(call)).map(deleted -> {
                if (deleted && state.compareAndSet(State.RELEASING, State.RELEASED)) {
                    registry.settled(this);
                    lost.tryEmitEmpty();
                    return ReleaseOutcome.RELEASED;
                }
                // Not held, or lost by its own clock while the hand-off was in flight (already signalled).
                markLost(LossReason.NOT_HELD, State.RELEASING, null, Signal.SCHEDULED);
                return ReleaseOutcome.NOT_HELD;
            });
        }
        if (s == State.RELEASED) {
            return Mono.just(ReleaseOutcome.RELEASED);
        }
        LeaseLostException cause = loss;
        if (cause != null && (cause.reason() == LossReason.EXPIRED || cause.reason() == LossReason.SERVER_CHANGED)) {
            // Lost by our clock, or by a change of server that may have kept the key (a failover to a replica that
            // has it): the key may still be ours; free it for the next holder (owner- and token-checked).
            return releaseInStore(call)
                    .onErrorResume(e -> Mono.just(false))
                    .thenReturn(ReleaseOutcome.NOT_HELD);
        }
        return Mono.just(ReleaseOutcome.NOT_HELD);
    }

    /**
     * The tail of {@link #releaseNoSoonerThan}: once no renewal is in flight, one owner-checked renewal for the rest
     * of the time (rounded up, so never short), which sets the lock's expiry in the service; the renewer has already
     * forgotten the lease, so nothing renews it again. No hand-off and no notification: the lock stays taken until it
     * expires. If the time ran out meanwhile, a plain release.
     */
    private Mono<ReleaseOutcome> leaveToExpire(long keepUntil) {
        // After any renewal in flight, so that none sent earlier can land later and extend the lock again.
        return renewer.settled(this).then(Mono.defer(() -> {
            long tailNanos = keepUntil - runtime.now();
            if (tailNanos <= 0) {
                return releaseInStore().map(deleted -> {
                    if (deleted) {
                        state.set(State.RELEASED);
                        registry.settled(this);
                        lost.tryEmitEmpty();
                        return ReleaseOutcome.RELEASED;
                    }
                    markLost(LossReason.NOT_HELD, State.RELEASING, null, Signal.SCHEDULED);
                    return ReleaseOutcome.NOT_HELD;
                });
            }
            return setLastExpiry(tailNanos);
        }));
    }

    private Mono<ReleaseOutcome> setLastExpiry(long tailNanos) {
        long millis = Math.max(1, (tailNanos + 999_999) / 1_000_000);
        return runtime.inFlight().track(runtime.store().renew(List.of(new LeaseStore.RenewRequest(name, owner, token, millis))))
                .map(held -> {
                    if (!held.isEmpty() && held.get(0)) {
                        state.set(State.RELEASED);
                        registry.settled(this);
                        lost.tryEmitEmpty();
                        log.debug("Lock '{}' token {} left to expire in {} ms", name, token, millis);
                        return ReleaseOutcome.LEFT_TO_EXPIRE;
                    }
                    markLost(LossReason.NOT_HELD, State.RELEASING, null, Signal.SCHEDULED);
                    return ReleaseOutcome.NOT_HELD;
                });
    }

    /**
     * The hold cap is reached while held: the lease is lost ({@link LossReason#MAX_HOLD_REACHED}) and its lock freed
     * (owner-checked), so the next holder need not wait for its expiry. The loss is signalled first, so the work
     * stops before anything else; the release is sent right after, so whoever hears the loss may still see the
     * lock held for the release's round trip. Called by the renewer's worker.
     */
    void reachMaxHold() {
        if (markLost(LossReason.MAX_HOLD_REACHED)) {
            releaseInStore().subscribe(null, e -> log.debug("Could not free lock '{}' at its maximum hold: {}", name,
                    e.toString()));
        }
    }

    @Override
    public void reportRejectedWrite(StaleFencingTokenException rejection) {
        runtime.observer().writeRejected(name);
        boolean newerHolder = rejection.storedToken() > token
                || (rejection.storedToken() == token && !owner.equals(rejection.storedOwner()));
        if (!newerHolder) {
            return; // rejected by a strict rule for writing twice: nobody else holds the lock
        }
        runtime.floors().raise(name, rejection.storedToken());
        // Inline: the writer whose write was refused sees the loss before its call returns (a withLease then
        // fails with the loss, not with the rejection).
        if (markLost(LossReason.SUPERSEDED, State.HELD, rejection, Signal.INLINE)) {
            // Our key may still be in Redis (a lock service that lost data re-issued our token): free it now
            // rather than make the next holder wait out the lease.
            releaseInStore().subscribe(null,
                    e -> log.debug("Could not free superseded lock '{}': {}", name, e.toString()));
        }
    }

    /**
     * A hand-off in flight, during which the lease is lost ({@link LossReason#EXPIRED}) at its deadline if the store
     * has not answered by then. A hand-off is also the next owner's acquire, which a store may hold on to after its
     * command timeout until it knows whether the acquire took effect (the PostgreSQL store cancels the statement and
     * waits for it): the renewer has already forgotten the lease, so without this timer its loss would wait for that
     * answer. A hand-off answered after the deadline reports {@link ReleaseOutcome#NOT_HELD}, the loss having been
     * signalled.
     */
    private Mono<Boolean> expiringAtDeadline(Mono<Boolean> handOff) {
        return Mono.defer(() -> {
            reactor.core.Disposable expiry;
            try {
                expiry = scheduleExpiry();
            } catch (java.util.concurrent.RejectedExecutionException e) {
                // The client is closing, or its injected scheduler is disposed (the renewer has said so): the
                // hand-off's own answer decides, as before the timer existed.
                return handOff;
            }
            return handOff.doFinally(signal -> expiry.dispose());
        });
    }

    /**
     * Marks the lease lost ({@link LossReason#EXPIRED}) at its deadline, if it is still being released then: after a
     * failed release (no longer renewed, so unless a retried release succeeds first, {@link #lost()} does not stay
     * silent), and while a hand-off is in flight.
     */
    private void expireAtDeadlineIfStillReleasing() {
        try {
            scheduleExpiry();
        } catch (java.util.concurrent.RejectedExecutionException e) {
            markLost(LossReason.EXPIRED, State.RELEASING, null, Signal.SCHEDULED); // the client is closing
        }
    }

    /** The timer of {@link #expireAtDeadlineIfStillReleasing()}; throws if the scheduler rejects it. */
    private reactor.core.Disposable scheduleExpiry() {
        long delay = Math.max(0, deadline - runtime.now());
        return runtime.scheduler().schedule(() -> markLost(LossReason.EXPIRED, State.RELEASING, null, Signal.SCHEDULED),
                delay, TimeUnit.NANOSECONDS);
    }

    /** Releases on behalf of a scope that ends; failures are logged, never propagated. */
    Mono<Void> releaseQuietly() {
        return release()
                .doOnNext(outcome -> log.debug("Released lock '{}' token {}: {}", name, token, outcome))
                .onErrorResume(e -> {
                    log.warn("Could not release lock '{}' token {}; it expires with its lease: {}", name, token, e.toString());
                    return Mono.empty();
                })
                .then();
    }

    /**
     * Marks the lease lost and signals it off the calling thread (the renewer's or an I/O thread); false if it
     * was not held.
     */
    boolean markLost(LossReason reason) {
        return markLost(reason, State.HELD, null, Signal.SCHEDULED);
    }

    /** Marks the lease lost for the given cause and signals it off the calling thread; false if it was not held. */
    boolean markLost(LossReason reason, Throwable cause) {
        return markLost(reason, State.HELD, cause, Signal.SCHEDULED);
    }

    /** Marks the lease lost and signals it on the calling thread (for the test kit); false if it was not held. */
    boolean loseOnCallingThread(LossReason reason) {
        return markLost(reason, State.HELD, null, Signal.INLINE);
    }

    /**
     * Where a loss is signalled to the lease's subscribers: on the thread that finds it (a loss the caller
     * causes: a refused write, close, the test kit, so that it is signalled before the call returns), or on the
     * loss scheduler (a loss found by the renewer or an I/O thread, which must never run application code).
     */
    private enum Signal { INLINE, SCHEDULED }

    private boolean markLost(LossReason reason, State from, @Nullable Throwable cause, Signal signal) {
        if (!state.compareAndSet(from, State.LOST)) {
            return false;
        }
        LeaseLostException e = cause == null ? LeaseLostException.of(name, token, reason)
                : LeaseLostException.of(name, token, reason, cause);
        loss = e;
        renewer.forget(this);
        registry.settled(this);
        runtime.observer().leaseLost(name, reason);
        log.debug("{}", e.getMessage());
        if (signal == Signal.INLINE) {
            lost.tryEmitValue(e);
        } else {
            deliver(() -> lost.tryEmitValue(e));
        }
        return true;
    }

    /**
     * Runs a signal to the lease's subscribers on the loss scheduler, never on the thread that renews (or on
     * the caller's thread if that scheduler refuses work).
     */
    private void deliver(Runnable signal) {
        try {
            runtime.settings().lossScheduler().schedule(signal);
        } catch (java.util.concurrent.RejectedExecutionException e) {
            signal.run();
        }
    }

    /** On close: signal the loss, then delete the key if it still holds this lease. */
    Mono<Void> closeAndRelease() {
        if (!markLost(LossReason.CLIENT_CLOSED, State.HELD, null, Signal.INLINE)) {
            return Mono.empty();
        }
        return releaseInStore().onErrorResume(e -> {
            log.warn("Could not release lock '{}' token {} on close; it expires with its lease: {}", name, token, e.toString());
            return Mono.just(false);
        }).then();
    }

    /**
     * On close: completes once this lease, if it is being released (a tail waiting for the renewal in flight, then
     * writing its last expiry), is released or lost, so that close does not stop the renewer and the store under
     * it; at once otherwise. Close bounds the wait.
     */
    Mono<Void> releaseEnded() {
        return state.get() == State.RELEASING ? lost.asMono().onErrorResume(e -> Mono.empty()).then() : Mono.empty();
    }

    /**
     * Loses the lease because its server changed, and frees its key in case the new server kept it (a
     * failover to a replica that had it), so the next holder need not wait out the lease.
     */
    void loseToServerChange() {
        if (markLost(LossReason.SERVER_CHANGED)) {
            releaseInStore().subscribe(null, e -> log.debug("Could not free lock '{}' after a change of server: {}", name,
                    e.toString()));
        }
    }

    /**
     * On close, once the releases in flight have ended: a lease whose release failed, and that would have
     * been lost at its deadline by a timer of the stopping scheduler, is lost now.
     */
    void settleOnClose() {
        markLost(LossReason.CLIENT_CLOSED, State.RELEASING, null, Signal.INLINE);
    }

    /** Stops renewing this lease, as a holder frozen by a long pause would (for the test kit). */
    void freeze() {
        frozen = true;
    }

    boolean isFrozen() {
        return frozen;
    }

    LeaseRuntime runtime() {
        return runtime;
    }

    /**
     * The handle the application gets, made once: the lease is released once the handle is collected
     * ({@link LeaseHandle}). This lease holds it weakly, so that the renewer, which holds this lease, does not
     * keep it reachable.
     */
    synchronized LeaseHandle handle() {
        LeaseHandle existing = handle.get();
        if (existing != null) {
            return existing;
        }
        LeaseHandle made = LeaseHandle.of(this);
        handle = new WeakReference<>(made);
        return made;
    }

    /** The handle while it exists, else this lease: what a listing of held leases shows. */
    FencedLease publicView() {
        LeaseHandle existing = handle.get();
        return existing != null ? existing : this;
    }

    /**
     * The internal lease behind a lease of the public API: a handle's lease, or the lease itself; {@code null} for
     * a nested view (whose scope does not own the lease) or a lease of another implementation.
     *
     * @param lease a lease
     * @return the held lease, or {@code null}
     */
    static @Nullable HeldLease of(FencedLease lease) {
        return lease instanceof LeaseHandle h ? h.lease() : lease instanceof HeldLease held ? held : null;
    }

    /** The owner-checked release of this lease's lock, counted as in flight so that close lets it finish. */
    private Mono<Boolean> releaseInStore() {
        return releaseInStore(null);
    }

    /** As {@link #releaseInStore()}, through a batch's store call when given one. */
    private Mono<Boolean> releaseInStore(@Nullable BatchedReleases call) {
        return runtime.inFlight().track(call != null ? call.release(name, owner, token)
                : runtime.store().release(name, owner, token));
    }

    boolean isActive() {
        return state.get() == State.HELD;
    }

    @Nullable LeaseLostException loss() {
        return loss;
    }

    long deadline() {
        return deadline;
    }

    void extendTo(long newDeadline) {
        deadline = newDeadline;
    }

    long leaseNanos() {
        return leaseNanos;
    }

    long leaseMillis() {
        return TimeUnit.NANOSECONDS.toMillis(leaseNanos);
    }

    long renewEveryNanos() {
        return renewEveryNanos;
    }

    /** When the acquire's reply arrived, by the monotonic clock: after the service's grant. */
    long grantedAt() {
        return grantedAt;
    }

    @Override
    public String toString() {
        return "FencedLease{name='" + name + "', token=" + token + ", owner=" + owner + ", state=" + state.get() + "}";
    }
}
