package dev.fenced.lock.internal;

import dev.fenced.lock.LockClientClosedException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * One cancel-safe acquire attempt: a single store call for a fresh owner id, and its undo. Lettuce cannot
 * recall a command already on the wire, so an attempt whose subscriber leaves before the reply is undone
 * when the reply (or failure) arrives ({@link Undos}). A grant that arrives after the client began to close
 * is released and fails with {@link LockClientClosedException}: no lease is emitted to a client that no
 * longer renews it. Thread-safe.
 */
final class AcquireAttempt {

    private static final int PENDING = 0;
    private static final int DONE = 1;
    private static final int CANCELLED = 2;

    private final LeaseRuntime runtime;
    private final OwnerIds ownerIds = new OwnerIds();
    private final Undos undos;
    private final LeaseGrants grants;
    private final BooleanSupplier closed;

    /**
     * @param runtime what the lifecycle shares
     * @param undos releases what abandoned attempts took
     * @param grants turns a grant into a held lease
     * @param closed whether the client is closing
     */
    AcquireAttempt(LeaseRuntime runtime, Undos undos, LeaseGrants grants, BooleanSupplier closed) {
        this.runtime = runtime;
        this.undos = undos;
        this.grants = grants;
        this.closed = closed;
    }

    /**
     * Makes one attempt. Cold; cancelling it before the reply undoes what it takes.
     *
     * @param name the lock name
     * @param leaseNanos the lease time
     * @param capNanos the hold cap, or 0 for none
     * @return the lease, or the holder's remaining time
     */
    Mono<Result> run(String name, long leaseNanos, long capNanos) {
        return run(name, leaseNanos, capNanos,
                (owner, leaseMillis, floor) -> runtime.store().acquire(name, owner, leaseMillis, floor));
    }

    /**
     * Makes one attempt whose store call is {@code send} (a hand-off from a releasing lease, say), with the same
     * owner id, floor, undo and grant as {@link #run(String, long, long)}. With a hold cap shorter than the lease
     * time, the store is asked for the cap only.
     *
     * @param name the lock name
     * @param leaseNanos the lease time
     * @param capNanos the hold cap, or 0 for none
     * @param send the store call for the attempt's owner id
     * @return the lease, or the holder's remaining time
     */
    Mono<Result> run(String name, long leaseNanos, long capNanos, Sender send) {
        return Mono.<Result>create(sink -> {
            String owner = ownerIds.next();
            long floor = runtime.floors().of(name);
            long leaseMillis = TimeUnit.NANOSECONDS.toMillis(capNanos > 0 ? Math.min(leaseNanos, capNanos) : leaseNanos);
            AtomicInteger state = new AtomicInteger(PENDING);
            sink.onCancel(() -> state.compareAndSet(PENDING, CANCELLED));
            long sentAt = runtime.now(); // deadlines count from before the command is sent
            runtime.inFlight().track(send.acquire(owner, leaseMillis, floor)).subscribe(
                    reply -> {
                        if (!reply.acquired()) {
                            if (state.compareAndSet(PENDING, DONE)) {
                                sink.success(new Result(null, reply.holderTtlMillis()));
                            }
                            return;
                        }
                        if (!state.compareAndSet(PENDING, DONE)) {
                            undos.undo(name, owner, reply.token(), leaseMillis, null);
                            return;
                        }
                        runtime.floors().passed(name, floor);
                        if (closed.getAsBoolean()) {
                            undos.undo(name, owner, reply.token(), leaseMillis, null);
                            sink.error(LockClientClosedException.of(name));
                            return;
                        }
                        HeldLease lease = grants.grant(name, owner, reply.token(), leaseNanos, capNanos, sentAt,
                                runtime.now());
                        if (closed.getAsBoolean()) {
                            // Close began while the lease was being registered: it may have missed it. Never
                            // emit a lease to a closing client; end it (the close may have ended it already).
                            lease.closeAndRelease().subscribe();
                            sink.error(LockClientClosedException.of(name));
                            return;
                        }
                        sink.success(new Result(lease, 0));
                    },
                    error -> {
                        // The script may have run before the failure (a timeout, a reset): undo by owner.
                        undos.undo(name, owner, null, leaseMillis, error);
                        if (state.compareAndSet(PENDING, DONE)) {
                            sink.error(error);
                        }
                    });
        }).doOnDiscard(Result.class, result -> {
            HeldLease lease = result.lease();
            if (lease != null) {
                lease.releaseQuietly().subscribe();
            }
        });
    }

    /**
     * The result of one attempt: a lease, or the holder's remaining time.
     *
     * @param lease the lease, or {@code null} when the lock is held by someone else
     * @param holderTtlMillis the holder's remaining time (negative if unknown)
     */
    record Result(@Nullable HeldLease lease, long holderTtlMillis) {
    }

    /** The store call of one attempt. */
    interface Sender {

        /**
         * @param owner the attempt's owner id
         * @param leaseMillis the lease time
         * @param floor a token the next token must exceed, or 0
         * @return the store's reply
         */
        Mono<LeaseStore.AcquireReply> acquire(String owner, long leaseMillis, long floor);
    }

    /** Makes a held lease of a grant, and starts renewing it. */
    interface LeaseGrants {

        /**
         * @param name the lock name
         * @param owner the owner id
         * @param token the token
         * @param leaseNanos the lease time
         * @param capNanos the hold cap, or 0 for none
         * @param sentAt when the acquire was sent, by the monotonic clock
         * @param repliedAt when its reply arrived, by the monotonic clock
         * @return the held lease
         */
        HeldLease grant(String name, String owner, long token, long leaseNanos, long capNanos, long sentAt, long repliedAt);
    }
}
