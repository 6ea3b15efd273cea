package dev.fenced.lock.internal;

import dev.fenced.lock.LockAcquireTimeoutException;
import dev.fenced.lock.LockClientClosedException;
import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import reactor.core.Disposable;
import reactor.core.publisher.BaseSubscriber;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;
import reactor.util.Logger;
import reactor.util.Loggers;
import reactor.util.context.Context;

/**
 * Waits for a held lock without a blocked thread and without polling in a loop.
 *
 * <p>It makes an attempt at once, so an uncontended acquire costs one round trip. If the lock is held,
 * it starts watching the lock's release notifications and, once listening is confirmed, attempts again
 * (a release before it listened is not missed). While the lock stays held, the next attempt is made when
 * a release is heard of, or when a timer fires a little after the holder's lease would run out (pub/sub
 * is at-most-once, so the timer is what guarantees progress). A notification heard while an attempt is
 * in flight triggers another attempt right after it.
 *
 * <p>The waiter's flags are guarded by its monitor; attempts, timers and signals are started outside it.
 * The maximum wait is enforced outside, by cancelling the waiter: a pending attempt is then undone.
 */
final class AcquireWaiter {

    private static final Logger log = Loggers.getLogger(AcquireWaiter.class);

    private final LeasingLockClient client;
    private final String name;
    private final long leaseNanos;
    private final Duration maxWait;
    private final long startedAt;
    private final MonoSink<HeldLease> sink;

    private boolean watching;
    private long lastHolderTtlMillis = -1;
    private boolean ready;
    private boolean inFlight;
    private boolean notified;
    private boolean done;
    private @Nullable WaitQueue queue;
    private @Nullable Disposable attempt;
    private @Nullable Disposable timer;
    private @Nullable Disposable deadline;

    private AcquireWaiter(LeasingLockClient client, String name, long leaseNanos, Duration maxWait, MonoSink<HeldLease> sink) {
        this.client = client;
        this.name = name;
        this.leaseNanos = leaseNanos;
        this.maxWait = maxWait;
        this.startedAt = client.now();
        this.sink = sink;
    }

    /**
     * Waits up to {@code maxWait} for the lock. The wait is enforced here, under the waiter's monitor, so a
     * lease that arrives as the wait ends is either delivered or released, never dropped. The timer starts
     * when the lock turns out to be held (so an uncontended acquire schedules nothing: its one attempt is
     * bounded by the command timeout), or at once when the wait is no longer than the command timeout.
     */
    static Mono<HeldLease> waitFor(LeasingLockClient client, String name, long leaseNanos, Duration maxWait) {
        return Mono.create(sink -> new AcquireWaiter(client, name, leaseNanos, maxWait, sink).start());
    }

    String name() {
        return name;
    }

    private void start() {
        sink.onCancel(this::cancel);
        if (!client.register(this)) {
            fail(LockClientClosedException.of(name));
            return;
        }
        boolean queueBehindOthers = client.hasWaiters(name);
        if (queueBehindOthers || maxWait.compareTo(client.commandTimeout()) <= 0) {
            // Either no attempt bounds the wait, or the command timeout cannot: time it from now.
            synchronized (this) {
                deadline = client.scheduler().schedule(this::onDeadline, maxWait.toNanos(), TimeUnit.NANOSECONDS);
            }
        }
        if (queueBehindOthers) {
            // Others of this client already wait for this lock: take a place in line rather than barge in
            // ahead of them (each release wakes the oldest waiter).
            synchronized (this) {
                watching = true;
            }
            watch();
            return;
        }
        synchronized (this) {
            beginAttempt();
        }
        attempt();
    }

    /** After the first busy reply: join the lock's wait queue, which confirms listening with onReady. */
    private void watch() {
        WaitQueue joined;
        do {
            joined = client.waitQueue(name);
        } while (!joined.join(this));
        boolean leaveNow;
        synchronized (this) {
            leaveNow = done;
            if (!done) {
                queue = joined;
            }
        }
        if (leaveNow) {
            joined.leave(this, true);
        }
    }

    /** Listening is confirmed: attempt again, so that a release before we listened is not missed. */
    void onReady() {
        synchronized (this) {
            if (done || ready) {
                return;
            }
            ready = true;
            if (inFlight) {
                return;
            }
            beginAttempt();
        }
        attempt();
    }

    /** Listening is confirmed and waiters are ahead of this one: wait for a turn, or the timer. */
    void onReadyBehindOthers() {
        synchronized (this) {
            if (done || ready) {
                return;
            }
            ready = true;
            if (!inFlight && timer == null) {
                timer = client.scheduler().schedule(this::onTimer, delayAfterBusy(lastHolderTtlMillis), TimeUnit.MILLISECONDS);
            }
        }
    }

    /** A release was heard of and this waiter is first in line (or was passed the turn). */
    void onNotification() {
        synchronized (this) {
            if (done) {
                return;
            }
            ready = true;
            if (inFlight) {
                notified = true;
                return;
            }
            beginAttempt();
        }
        attempt();
    }

    void onWatchFailed(Throwable error) {
        // Without notifications the timer alone bounds the wait.
        log.debug("Cannot watch releases of lock '{}', waiting on timers only: {}", name, error.toString());
        synchronized (this) {
            if (done || ready) {
                return;
            }
            ready = true;
            if (inFlight) {
                return;
            }
            beginAttempt();
        }
        attempt();
    }

    private void onTimer() {
        synchronized (this) {
            if (done || inFlight) {
                return;
            }
            beginAttempt();
        }
        attempt();
    }

    // Guarded by this.
    private void beginAttempt() {
        inFlight = true;
        notified = false;
        if (timer != null) {
            timer.dispose();
            timer = null;
        }
    }

    private void attempt() {
        // Not a lambda subscriber: disposed as a result arrives, a lambda subscriber drops the result
        // (onNextDropped) and with it a lease that nobody would release. This one delivers it, and onResult
        // releases the lease of a waiter that is done.
        Disposable d = client.attempt(name, leaseNanos).subscribeWith(new BaseSubscriber<LeasingLockClient.AttemptResult>() {
            @Override
            protected void hookOnNext(LeasingLockClient.AttemptResult result) {
                AcquireWaiter.this.onResult(result);
            }

            @Override
            protected void hookOnError(Throwable error) {
                AcquireWaiter.this.onError(error); // not BaseSubscriber's own onError
            }

            @Override
            public Context currentContext() {
                // The attempt's sink may still drop a result as this is disposed: that releases its lease.
                return Context.of(DroppedLeases.context());
            }
        });
        boolean cancelNow;
        synchronized (this) {
            cancelNow = done && inFlight;
            if (!cancelNow) {
                attempt = d;
            }
        }
        if (cancelNow) {
            d.dispose();
        }
    }

    private void onResult(LeasingLockClient.AttemptResult result) {
        HeldLease lease = result.lease();
        boolean again = false;
        boolean startWatching = false;
        boolean cancelled = false;
        WaitQueue w = null;
        synchronized (this) {
            inFlight = false;
            lastHolderTtlMillis = result.holderTtlMillis();
            if (done) {
                cancelled = true;
            } else if (lease != null) {
                done = true;
                w = queue;
                Disposable d = deadline;
                if (d != null) {
                    d.dispose();
                }
            } else if (!watching) {
                // Busy for the first time: the next attempt follows the confirmation of listening.
                watching = true;
                startWatching = true;
                if (deadline == null) {
                    long left = maxWait.toNanos() - (client.now() - startedAt);
                    deadline = client.scheduler().schedule(this::onDeadline, Math.max(0, left), TimeUnit.NANOSECONDS);
                }
            } else if (notified) {
                beginAttempt();
                again = true;
            } else if (ready) {
                long delayMillis = delayAfterBusy(result.holderTtlMillis());
                timer = client.scheduler().schedule(this::onTimer, delayMillis, TimeUnit.MILLISECONDS);
            }
            // else: busy while listening is not yet confirmed; the confirmation triggers the next attempt.
        }
        if (lease != null) {
            if (cancelled) {
                // The waiter was cancelled as the lease arrived: nobody will use it.
                lease.releaseQuietly().subscribe();
                return;
            }
            client.unregister(this);
            if (w != null) {
                w.leave(this, false);
            }
            sink.success(lease);
        } else if (startWatching) {
            watch();
        } else if (again) {
            attempt();
        }
    }

    private void onError(Throwable error) {
        fail(error);
    }

    private void onDeadline() {
        fail(LockAcquireTimeoutException.of(name, maxWait));
    }

    /** Ends the wait with an error (the lock service failed, the wait ran out, the client closed). */
    void fail(Throwable error) {
        WaitQueue w;
        Disposable t;
        Disposable d;
        Disposable a;
        synchronized (this) {
            if (done) {
                return;
            }
            done = true;
            w = queue;
            t = timer;
            d = deadline;
            a = inFlight ? attempt : null; // cancelling an attempt in flight undoes what it takes
        }
        dispose(t, d, a);
        client.unregister(this);
        if (w != null) {
            w.leave(this, true);
        }
        sink.error(error);
    }

    private void cancel() {
        WaitQueue w;
        Disposable t;
        Disposable d;
        Disposable a;
        synchronized (this) {
            if (done) {
                return;
            }
            done = true;
            w = queue;
            t = timer;
            d = deadline;
            a = inFlight ? attempt : null;
        }
        dispose(t, d, a);
        client.unregister(this);
        if (w != null) {
            w.leave(this, true);
        }
    }

    private static void dispose(@Nullable Disposable... disposables) {
        for (Disposable d : disposables) {
            if (d != null) {
                d.dispose();
            }
        }
    }

    private long delayAfterBusy(long holderTtlMillis) {
        // A little after the holder's lease would run out; jitter spreads the waiters that wake together.
        // PTTL: 0 or more is the holder's time left; -1 means the key has no expiry (not ours), so poll slowly.
        long bound = holderTtlMillis >= 0 ? holderTtlMillis : Math.max(1, TimeUnit.NANOSECONDS.toMillis(leaseNanos) / 3);
        long jitter = ThreadLocalRandom.current().nextLong(1, Math.max(2, Math.min(bound / 10, 50) + 1));
        return bound + jitter;
    }
}
