package dev.fenced.lock.internal;

import dev.fenced.lock.LockAcquireTimeoutException;
import dev.fenced.lock.LockClientClosedException;
import dev.fenced.lock.LockWaitQueueFullException;
import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import reactor.core.Disposable;
import reactor.core.publisher.BaseSubscriber;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.publisher.MonoSink;
import reactor.util.Logger;
import reactor.util.Loggers;
import reactor.util.context.Context;

/**
 * Waits for a held lock without a blocked thread and without polling.
 *
 * <p>It makes an attempt at once, so an uncontended acquire costs one round trip (unless other acquires of
 * this client already wait for the lock: then it takes its place in line without one). Once the lock turns
 * out to be held, it joins the lock's {@link WaitQueue}. The head of the queue attempts again once listening
 * is confirmed (a release before that is not missed), then on every release notification and when a timer
 * fires a little after the holder's lease would run out (pub/sub is at-most-once, so the timer is what
 * guarantees progress). Waiters behind the head make no attempt and keep no timer until their turn.
 *
 * <p>The waiter's {@link State} is its one piece of state, guarded by its monitor; attempts, timers and
 * signals are started outside it. Every way out (a lease, an error, a cancel) goes through {@link #end}. The
 * maximum wait is enforced here, under the monitor, so a lease that arrives as the wait ends is either
 * delivered or released, never dropped.
 */
final class AcquireWaiter {

    private static final Logger log = Loggers.getLogger(AcquireWaiter.class);

    /** Where a waiter is. */
    enum State {
        /** The first attempt is in flight; not in a queue. */
        FIRST_ATTEMPT,
        /** In a queue, waiting for listening to be confirmed. */
        JOINING,
        /** Behind the head of the queue: waits for its turn, with no attempt and no timer. */
        IN_LINE,
        /** The head: a timer is armed; waits for a notification or the timer. */
        HEAD,
        /** The head, with an attempt in flight. */
        ATTEMPTING,
        /** The head, with an attempt in flight and a notification heard since it was sent: attempt again. */
        ATTEMPTING_NOTIFIED,
        /** Ended: with a lease, an error or a cancel. */
        DONE
    }

    private final LeaseRuntime runtime;
    private final Waiters waiters;
    private final AcquireAttempt attempts;
    private final String name;
    private final long leaseNanos;
    private final long capNanos;
    private final Duration maxWait;
    private final int maxWaiters;
    private final long startedAt;
    private final MonoSink<HeldLease> sink;

    private State state = State.FIRST_ATTEMPT;
    private long lastHolderTtlMillis = -1;
    private @Nullable WaitQueue queue;
    private @Nullable Disposable attempt;
    private @Nullable Disposable timer;
    private @Nullable Disposable deadline;

    private AcquireWaiter(LeaseRuntime runtime, Waiters waiters, AcquireAttempt attempts, String name, long leaseNanos,
            long capNanos, Duration maxWait, int maxWaiters, long startedAt, MonoSink<HeldLease> sink) {
        this.runtime = runtime;
        this.waiters = waiters;
        this.attempts = attempts;
        this.name = name;
        this.leaseNanos = leaseNanos;
        this.capNanos = capNanos;
        this.maxWait = maxWait;
        this.maxWaiters = maxWaiters;
        this.startedAt = startedAt;
        this.sink = sink;
    }

    /**
     * Waits up to {@code maxWait} for the lock. The timer of the wait starts when the lock turns out to be
     * held (so an uncontended acquire schedules nothing: its one attempt is bounded by the command timeout), or
     * at once when the wait is no longer than the command timeout or the acquire queues behind others.
     *
     * <p>An uncontended acquire costs no more than a single attempt: unless the wait must be timed from the start
     * or others of this client already wait for the lock, the first attempt runs as the subscriber's own, and a
     * waiter exists only once it finds the lock held. Until then nothing is registered: a close that begins
     * meanwhile lets the attempt's command end (close waits for the commands in flight up to the command timeout,
     * then closes the connections); a grant is then released, and the acquire fails with
     * {@link LockClientClosedException} whatever the command's outcome.
     */
    static Mono<HeldLease> waitFor(LeaseRuntime runtime, Waiters waiters, AcquireAttempt attempts, String name,
            long leaseNanos, long capNanos, Duration maxWait, int maxWaiters) {
        return Mono.defer(() -> {
            if (maxWait.compareTo(runtime.commandTimeout()) <= 0 || waiters.hasWaiters(name)) {
                return Mono.create(sink -> new AcquireWaiter(runtime, waiters, attempts, name, leaseNanos, capNanos, maxWait,
                        maxWaiters, runtime.now(), sink).start());
            }
            long startedAt = runtime.now();
            return attempts.run(name, leaseNanos, capNanos)
                    // As a waiter's would: a first attempt cut off by close (its connection closed) ends with close's error.
                    .onErrorMap(e -> waiters.isClosed() && !(e instanceof LockClientClosedException),
                            e -> LockClientClosedException.of(name))
                    .flatMap(first -> {
                        HeldLease lease = first.lease();
                        return lease != null ? Mono.just(lease) : Mono.<HeldLease>create(sink -> new AcquireWaiter(runtime,
                                waiters, attempts, name, leaseNanos, capNanos, maxWait, maxWaiters, startedAt, sink)
                                .afterBusyFirstAttempt(first));
                    });
        });
    }

    String name() {
        return name;
    }

    private void start() {
        sink.onCancel(() -> end(null, null));
        if (!waiters.register(this)) {
            end(null, LockClientClosedException.of(name));
            return;
        }
        boolean behindOthers = waiters.hasWaiters(name);
        synchronized (this) {
            if (state == State.DONE) {
                return; // cancelled on another thread since onCancel was registered
            }
            if (behindOthers || maxWait.compareTo(runtime.commandTimeout()) <= 0) {
                // Either no attempt bounds the wait, or the command timeout cannot: time it from now.
                deadline = deadlineTimer(maxWait.toNanos());
            }
            state = behindOthers ? State.JOINING : State.FIRST_ATTEMPT;
        }
        if (behindOthers) {
            // Others of this client already wait for this lock: take a place in line rather than barge in.
            join();
        } else {
            attempt();
        }
    }

    /**
     * Starts a waiter whose first attempt ran before it existed and found the lock held: as {@link #onResult}
     * does for a busy first attempt, it arms the timer of the wait (what is left of it) and joins the queue.
     */
    private void afterBusyFirstAttempt(AcquireAttempt.Result first) {
        sink.onCancel(() -> end(null, null));
        if (!waiters.register(this)) {
            end(null, LockClientClosedException.of(name));
            return;
        }
        synchronized (this) {
            if (state == State.DONE) {
                return;
            }
            lastHolderTtlMillis = first.holderTtlMillis();
            state = State.JOINING;
            long left = maxWait.toNanos() - (runtime.now() - startedAt);
            deadline = deadlineTimer(Math.max(0, left));
        }
        join();
    }

    /** After the first busy reply: join the lock's wait queue, which confirms listening with onListening. */
    private void join() {
        WaitQueue joined;
        WaitQueue.Joined outcome;
        do {
            joined = waiters.queue(name);
            outcome = joined.join(this, maxWaiters);
        } while (outcome == WaitQueue.Joined.REMOVED);
        if (outcome == WaitQueue.Joined.FULL) {
            end(null, LockWaitQueueFullException.of(name, maxWaiters));
            return;
        }
        boolean leaveNow;
        synchronized (this) {
            leaveNow = state == State.DONE;
            if (!leaveNow) {
                queue = joined;
            }
        }
        if (leaveNow) {
            joined.leave(this, false);
        }
    }

    /**
     * Listening is confirmed. The head attempts again, so that a release before it listened is not missed;
     * the others wait for their turn.
     */
    void onListening(boolean head) {
        synchronized (this) {
            // HEAD without being the head: listening had failed, and every waiter kept a timer. Now that it works
            // again, only the head stays active.
            if (state != State.JOINING && state != State.HEAD) {
                return;
            }
            if (!head) {
                state = State.IN_LINE;
                disposeTimer();
                return;
            }
            state = State.ATTEMPTING;
            disposeTimer();
        }
        attempt();
    }

    /** A release was heard of and this waiter is the head, or the head left without the lock: attempt now. */
    void onNotification() {
        synchronized (this) {
            switch (state) {
                case ATTEMPTING -> {
                    state = State.ATTEMPTING_NOTIFIED;
                    return;
                }
                case HEAD, IN_LINE, JOINING -> {
                    state = State.ATTEMPTING;
                    disposeTimer();
                }
                default -> {
                    return;
                }
            }
        }
        attempt();
    }

    /** The head ahead of this waiter took the lock: this one is the head now, and waits for that holder. */
    void onBecameHead() {
        synchronized (this) {
            if (state != State.IN_LINE && state != State.JOINING) {
                return;
            }
            becomeHead();
        }
    }

    /** Without notifications the timer alone bounds the wait; every waiter keeps one. */
    void onWatchFailed(Throwable error) {
        log.debug("Cannot watch releases of lock '{}', waiting on timers only: {}", name, error.toString());
        synchronized (this) {
            if (state == State.JOINING || state == State.IN_LINE) {
                becomeHead();
            }
        }
    }

    private void onTimer() {
        synchronized (this) {
            if (state != State.HEAD) {
                return;
            }
            state = State.ATTEMPTING;
            timer = null;
        }
        attempt();
    }

    // Guarded by this.
    private void becomeHead() {
        state = State.HEAD;
        disposeTimer();
        timer = runtime.scheduler().schedule(this::onTimer, delayAfterBusy(lastHolderTtlMillis), TimeUnit.MILLISECONDS);
    }

    // Guarded by this.
    private void disposeTimer() {
        if (timer != null) {
            timer.dispose();
            timer = null;
        }
    }

    /**
     * A lease of this client releases the lock and offers it to this waiter, the head of the queue: unless the
     * waiter is not simply waiting (an attempt in flight, still joining, done), its next attempt is the hand-off
     * itself, one store call that releases the lease and tries to take the lock for this waiter.
     *
     * @param releasing the lease being released
     * @return whether the releasing lease held the lock, once the store has answered; {@code null} if this waiter
     *     cannot take the lock over now
     */
    @Nullable Mono<Boolean> takeOver(HeldLease releasing) {
        synchronized (this) {
            if (state != State.HEAD) {
                return null;
            }
            state = State.ATTEMPTING;
            disposeTimer();
        }
        Sinks.One<Boolean> released = Sinks.one();
        attempt((owner, leaseMillis, floor) -> runtime.store()
                .handOff(name, releasing.ownerId(), releasing.token(), owner, leaseMillis, floor)
                // The call failed: whether the release happened is not known, as when a plain release fails.
                .doOnError(released::tryEmitError)
                .flatMap(handoff -> {
                    released.tryEmitValue(handoff.released());
                    LeaseStore.AcquireReply next = handoff.next();
                    Throwable failure = handoff.nextFailure();
                    return next != null ? Mono.just(next)
                            : Mono.error(failure != null ? failure : new IllegalStateException("hand-off without a reply"));
                }), true);
        return released.asMono();
    }

    private void attempt() {
        attempt((owner, leaseMillis, floor) -> runtime.store().acquire(name, owner, leaseMillis, floor), false);
    }

    /**
     * @param send the store call
     * @param handoff whether it is a hand-off: its failure may be the releasing lease's, not this waiter's, so
     *     the waiter goes on waiting on its timer instead of ending with the error
     */
    private void attempt(AcquireAttempt.Sender send, boolean handoff) {
        // Not a lambda subscriber: disposed as a result arrives, a lambda subscriber drops the result
        // (onNextDropped) and with it a lease that nobody would release. This one delivers it, and onResult
        // releases the lease of a waiter that is done.
        Disposable d = attempts.run(name, leaseNanos, capNanos, send).subscribeWith(new BaseSubscriber<AcquireAttempt.Result>() {
            @Override
            protected void hookOnNext(AcquireAttempt.Result result) {
                AcquireWaiter.this.onResult(result);
            }

            @Override
            protected void hookOnError(Throwable error) {
                if (handoff && !(error instanceof LockClientClosedException)) {
                    onHandoffFailed(error);
                } else {
                    end(null, error);
                }
            }

            @Override
            public Context currentContext() {
                // The attempt's sink may still drop a result as this is disposed: that releases its lease.
                return Context.of(DroppedLeases.context());
            }
        });
        boolean cancelNow;
        synchronized (this) {
            cancelNow = state == State.DONE;
            if (!cancelNow) {
                attempt = d;
            }
        }
        if (cancelNow) {
            d.dispose();
        }
    }

    /**
     * A hand-off failed (what it took, if anything, is undone by {@link AcquireAttempt}): the waiter is the head
     * again and waits on its timer, as after a busy reply.
     */
    private void onHandoffFailed(Throwable error) {
        log.debug("Hand-off of lock '{}' failed, waiting on: {}", name, error.toString());
        boolean again = false;
        synchronized (this) {
            attempt = null;
            if (state == State.ATTEMPTING_NOTIFIED) {
                state = State.ATTEMPTING;
                again = true;
            } else if (state == State.ATTEMPTING) {
                becomeHead();
            }
        }
        if (again) {
            attempt();
        }
    }

    private void onResult(AcquireAttempt.Result result) {
        HeldLease lease = result.lease();
        boolean join = false;
        boolean again = false;
        boolean ended;
        synchronized (this) {
            attempt = null;
            lastHolderTtlMillis = result.holderTtlMillis();
            ended = state == State.DONE;
            if (!ended && lease == null) {
                switch (state) {
                    case FIRST_ATTEMPT -> {
                        // Busy for the first time: the next attempt follows the confirmation of listening.
                        state = State.JOINING;
                        join = true;
                        if (deadline == null) {
                            long left = maxWait.toNanos() - (runtime.now() - startedAt);
                            deadline = deadlineTimer(Math.max(0, left));
                        }
                    }
                    case ATTEMPTING_NOTIFIED -> {
                        state = State.ATTEMPTING;
                        again = true;
                    }
                    default -> becomeHead();
                }
            }
        }
        if (ended) {
            if (lease != null) {
                // The waiter ended as the lease arrived: nobody will use it. Released outside the monitor: a
                // release may hand the lock to another waiter, whose monitor it then takes.
                lease.releaseQuietly().subscribe();
            }
        } else if (lease != null) {
            end(lease, null);
        } else if (join) {
            join();
        } else if (again) {
            attempt();
        }
    }

    /**
     * The timer of the maximum wait. It fires on the loss scheduler, not the renewal scheduler: the
     * {@link LockAcquireTimeoutException} it emits runs the application's error handling.
     */
    // Guarded by this.
    private Disposable deadlineTimer(long delayNanos) {
        return runtime.settings().lossScheduler().schedule(this::onDeadline, delayNanos, TimeUnit.NANOSECONDS);
    }

    private void onDeadline() {
        end(null, LockAcquireTimeoutException.of(name, maxWait));
    }

    /** Ends the wait with an error (the lock service failed, the client closed). */
    void fail(Throwable error) {
        end(null, error);
    }

    /**
     * The one way out: with a lease, with an error, or (both {@code null}) cancelled by the subscriber.
     * Cancelling an attempt in flight undoes what it takes; leaving the queue without the lock passes the turn.
     */
    private void end(@Nullable HeldLease lease, @Nullable Throwable error) {
        WaitQueue w;
        Disposable a;
        boolean alreadyDone;
        synchronized (this) {
            alreadyDone = state == State.DONE;
            w = alreadyDone ? null : queue;
            a = alreadyDone ? null : attempt;
            if (!alreadyDone) {
                state = State.DONE;
                attempt = null;
                disposeTimer();
                if (deadline != null) {
                    deadline.dispose();
                    deadline = null;
                }
            }
        }
        if (alreadyDone) {
            if (lease != null) {
                // Released outside the monitor: a release may hand the lock to another waiter, whose monitor it takes.
                lease.releaseQuietly().subscribe();
            }
            return;
        }
        if (a != null) {
            a.dispose();
        }
        waiters.unregister(this);
        if (w != null) {
            // With the lock, the next waiter waits for this holder. Failed by the lock service, it waits its timer
            // too: waking it at once would send it into the same failure, and so on down the line.
            w.leave(this, lease != null || error instanceof dev.fenced.lock.LockServiceException);
        }
        if (lease != null) {
            sink.success(lease);
        } else if (error != null) {
            sink.error(error);
        }
    }


    private long delayAfterBusy(long holderTtlMillis) {
        // A little after the holder's lease would run out; jitter spreads the waiters that wake together.
        // PTTL: 0 or more is the holder's time left; -1 means unknown (or a key without expiry): a third of
        // this waiter's lease time.
        long bound = holderTtlMillis >= 0 ? holderTtlMillis : Math.max(1, TimeUnit.NANOSECONDS.toMillis(leaseNanos) / 3);
        long jitter = ThreadLocalRandom.current().nextLong(1, Math.max(2, Math.min(bound / 10, 50) + 1));
        return bound + jitter;
    }
}
