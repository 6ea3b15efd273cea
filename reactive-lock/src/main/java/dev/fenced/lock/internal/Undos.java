package dev.fenced.lock.internal;

import dev.fenced.lock.LockServiceException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * Releases what abandoned acquires may hold: an attempt whose subscriber left while its command was on the
 * wire, or whose reply was lost (a timeout, a reset). Lettuce cannot recall a command already sent, so the
 * lock it may have taken is released, owner-checked, so that a late undo never frees another holder's lock.
 *
 * <p>While the lock service cannot be reached, undos are retried with back-off for as long as the lease they
 * undo could hold its lock (otherwise one lost reply would block the name for a whole lease). They are
 * coalesced per name: one retry loop per name releases every pending owner of that name together, and at
 * most {@value #MAX_PENDING_PER_NAME} owners wait per name (the rest expire with their lease). A command that
 * never left (not connected, connect failure, client closed) took nothing and needs no undo at all. An acquire
 * that failed without a reply may still take the lock for a while in some stores (a PostgreSQL statement waiting
 * on a row lock outlives its reset connection): its undo is repeated until the store's
 * {@link LeaseStore#lateGrantWindow()} has passed since the failure, not only until its first "nothing held",
 * and closing the client does not cut that short ({@link #flush()}). Thread-safe: the pending owners are guarded
 * by the monitor.
 */
final class Undos {

    private static final Logger log = Loggers.getLogger(Undos.class);

    /** Owners that wait for an undo of one name, at most. */
    static final int MAX_PENDING_PER_NAME = 64;

    private static final Duration FIRST_BACKOFF = Duration.ofMillis(20);
    private static final Duration MAX_BACKOFF = Duration.ofSeconds(1);
    /** The longest pause between two undos of an acquire that may still take effect: how long a late grant can hold. */
    private static final Duration MAX_SETTLE_BACKOFF = Duration.ofMillis(200);

    private final LeaseRuntime runtime;
    private final java.util.function.BooleanSupplier closed;
    private final Map<String, List<Pending>> pending = new HashMap<>();

    /**
     * @param runtime what the lifecycle shares
     * @param closed whether the client is closed: then failed undos are retried only while their acquire may still
     *     take effect, and back-offs are short (close waits for them before the connections close)
     */
    Undos(LeaseRuntime runtime, java.util.function.BooleanSupplier closed) {
        this.runtime = runtime;
        this.closed = closed;
    }

    /**
     * Undoes an attempt that may have taken the lock.
     *
     * @param name the lock name
     * @param owner the attempt's owner id
     * @param token the token it took, or {@code null} when its reply never came (any token of the owner)
     * @param leaseMillis the attempt's lease time: how long what it took could hold the lock
     * @param failure the attempt's failure, or {@code null} when it took the lock and was abandoned
     */
    void undo(String name, String owner, @Nullable Long token, long leaseMillis, @Nullable Throwable failure) {
        if (failure != null && runtime.store().neverSent(failure)) {
            return; // the command never left: nothing was taken
        }
        boolean startLoop;
        synchronized (this) {
            List<Pending> owners = pending.get(name);
            startLoop = owners == null;
            if (startLoop) {
                owners = new ArrayList<>();
                pending.put(name, owners);
            }
            if (owners.size() >= MAX_PENDING_PER_NAME) {
                log.debug("Too many undos pending for lock '{}'; the acquire by {} expires with its lease", name, owner);
                return;
            }
            long now = runtime.now();
            long settledAt = failure == null ? now : now + runtime.store().lateGrantWindow().toNanos();
            owners.add(new Pending(owner, token, now + TimeUnit.MILLISECONDS.toNanos(leaseMillis), settledAt));
        }
        if (startLoop) {
            runtime.inFlight().track(loop(name, FIRST_BACKOFF)).subscribe();
        }
    }

    /**
     * On close: releases every pending owner of every name at once, not after its back-off, so that the
     * undos end before the store closes, and goes on undoing each owner whose acquire may still take effect
     * (its store's {@link LeaseStore#lateGrantWindow()} since its failure has not passed), at most
     * {@link #MAX_SETTLE_BACKOFF} apart, until it cannot: a grant that commits after the close began is then
     * released as it would have been had the client stayed open. The retry loops then find nothing left and end.
     * A release that still fails once its owner's window has passed is logged with the lock name and its cause.
     * Cold; never errors.
     *
     * @return completion once every pending owner was asked about after its acquire could last take effect
     */
    Mono<Void> flush() {
        return Flux.defer(() -> {
            List<Map.Entry<String, Pending>> all = new ArrayList<>();
            synchronized (this) {
                pending.forEach((name, owners) -> {
                    owners.forEach(p -> all.add(Map.entry(name, p)));
                    owners.clear();
                });
            }
            return Flux.fromIterable(all);
        }).flatMap(e -> undoUntilSettled(e.getKey(), e.getValue())).then();
    }

    /** On close: releases {@code p}, and again until its window has passed; logs a failure of the last release. */
    private Mono<Void> undoUntilSettled(String name, Pending p) {
        return runtime.store().release(name, p.owner, p.token)
                .then(Mono.<Throwable>empty())
                .onErrorResume(Mono::just)
                .map(Optional::of)
                .defaultIfEmpty(Optional.empty())
                .flatMap(failure -> {
                    long left = p.settledAt - runtime.now();
                    if (left > 0) {
                        Duration pause = Duration.ofNanos(Math.min(left, MAX_SETTLE_BACKOFF.toNanos()));
                        return Mono.delay(pause, runtime.scheduler()).then(undoUntilSettled(name, p));
                    }
                    failure.ifPresent(error -> log.warn("Could not undo an abandoned acquire of lock '{}' on close; it"
                            + " expires with its lease: {}", name, error.toString()));
                    return Mono.empty();
                });
    }

    /** Releases every pending owner of {@code name}; retries those the service could not be asked about. */
    private Mono<Void> loop(String name, Duration backoff) {
        return Mono.defer(() -> {
            List<Pending> batch;
            synchronized (this) {
                List<Pending> owners = pending.get(name);
                long now = runtime.now();
                batch = owners == null ? List.of() : owners.stream().filter(p -> p.until - now > 0).toList();
                if (batch.isEmpty()) {
                    pending.remove(name);
                    return Mono.empty();
                }
                owners.clear();
            }
            return Flux.fromIterable(batch)
                    .flatMap(p -> runtime.store().release(name, p.owner, p.token)
                            .doOnNext(deleted -> log.debug("Undid abandoned acquire of lock '{}' by {}: {}", name, p.owner,
                                    deleted ? "released" : "nothing held"))
                            // Answered, but the acquire may still take effect: ask again until it cannot, also
                            // once the client closes (close waits for this loop before the store closes).
                            .flatMap(deleted -> p.settledAt - runtime.now() > 0
                                    ? Mono.just(p.unsettled()) : Mono.<Pending>empty())
                            .onErrorResume(e -> retried(name, p, e)))
                    .collectList()
                    .flatMap(again -> {
                        if (!again.isEmpty()) {
                            synchronized (this) {
                                pending.computeIfAbsent(name, n -> new ArrayList<>()).addAll(again);
                            }
                        }
                        boolean failed = again.stream().anyMatch(p -> !p.answered);
                        // Closing waits for the loops: no long back-off then.
                        Duration cap = failed && !closed.getAsBoolean() ? MAX_BACKOFF : MAX_SETTLE_BACKOFF;
                        Duration pause = backoff.compareTo(cap) > 0 ? cap : backoff;
                        Duration next = pause.multipliedBy(2).compareTo(cap) > 0 ? cap : pause.multipliedBy(2);
                        return again.isEmpty() ? loop(name, backoff)
                                : Mono.delay(pause, runtime.scheduler()).then(loop(name, next));
                    });
        }).onErrorResume(e -> {
            log.debug("Undo of lock '{}' stopped: {}", name, e.toString());
            synchronized (this) {
                pending.remove(name);
            }
            return Mono.empty();
        });
    }

    /**
     * The owner to ask again after its undo failed with {@code error}, or nothing: while the client is open, an
     * undo is tried again whenever the lock service could not be asked; once it is closed, only while the acquire
     * may still take effect. A failure not retried once the client is closed is logged: that lock expires with
     * its lease.
     */
    private Mono<Pending> retried(String name, Pending p, Throwable error) {
        if (error instanceof LockServiceException && (!closed.getAsBoolean() || p.settledAt - runtime.now() > 0)) {
            return Mono.just(p);
        }
        if (closed.getAsBoolean()) {
            log.warn("Could not undo an abandoned acquire of lock '{}' on close; it expires with its lease: {}", name,
                    error.toString());
        }
        return Mono.empty();
    }

    /**
     * One owner to undo, until its lease would have ended; its acquire may take effect until {@code settledAt};
     * {@code answered} once an undo of it got a reply.
     */
    private record Pending(String owner, @Nullable Long token, long until, long settledAt, boolean answered) {

        Pending(String owner, @Nullable Long token, long until, long settledAt) {
            this(owner, token, until, settledAt, false);
        }

        Pending unsettled() {
            return new Pending(owner, token, until, settledAt, true);
        }
    }
}
