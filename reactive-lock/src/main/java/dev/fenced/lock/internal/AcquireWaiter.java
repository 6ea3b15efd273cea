package dev.fenced.lock.internal;

import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;
import reactor.util.Logger;
import reactor.util.Loggers;

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
    private final MonoSink<HeldLease> sink;

    private boolean watching;
    private boolean ready;
    private boolean inFlight;
    private boolean notified;
    private boolean done;
    private @Nullable Disposable watch;
    private @Nullable Disposable attempt;
    private @Nullable Disposable timer;

    private AcquireWaiter(LeasingLockClient client, String name, long leaseNanos, MonoSink<HeldLease> sink) {
        this.client = client;
        this.name = name;
        this.leaseNanos = leaseNanos;
        this.sink = sink;
    }

    static Mono<HeldLease> waitFor(LeasingLockClient client, String name, long leaseNanos) {
        return Mono.create(sink -> new AcquireWaiter(client, name, leaseNanos, sink).start());
    }

    private void start() {
        sink.onCancel(this::cancel);
        synchronized (this) {
            beginAttempt();
        }
        attempt();
    }

    /** After the first busy reply: listen for releases; the first signal confirms listening. */
    private void watch() {
        Disposable w = client.store().releases(name).subscribe(count -> onNotification(), this::onWatchFailed);
        synchronized (this) {
            if (!done) {
                watch = w;
                return;
            }
        }
        w.dispose();
    }

    private void onNotification() {
        synchronized (this) {
            if (done) {
                return;
            }
            if (!ready) {
                // Listening now: attempt again, so that a release before we listened is not missed.
                ready = true;
            } else {
                notified = true;
            }
            if (inFlight) {
                return;
            }
            beginAttempt();
        }
        attempt();
    }

    private void onWatchFailed(Throwable error) {
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
        Disposable d = client.attempt(name, leaseNanos).subscribe(this::onResult, this::onError);
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
        Disposable w = null;
        synchronized (this) {
            inFlight = false;
            if (done) {
                cancelled = true;
            } else if (lease != null) {
                done = true;
                w = watch;
            } else if (!watching) {
                // Busy for the first time: the next attempt follows the confirmation of listening.
                watching = true;
                startWatching = true;
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
            if (w != null) {
                w.dispose();
            }
            sink.success(lease);
        } else if (startWatching) {
            watch();
        } else if (again) {
            attempt();
        }
    }

    private void onError(Throwable error) {
        Disposable w;
        Disposable t;
        synchronized (this) {
            inFlight = false;
            if (done) {
                return;
            }
            done = true;
            w = watch;
            t = timer;
        }
        dispose(w, t, null);
        sink.error(error);
    }

    private void cancel() {
        Disposable w;
        Disposable t;
        Disposable a;
        synchronized (this) {
            if (done) {
                return;
            }
            done = true;
            w = watch;
            t = timer;
            a = inFlight ? attempt : null;
        }
        dispose(w, t, a);
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
        long bound = holderTtlMillis > 0 ? holderTtlMillis : Math.max(1, TimeUnit.NANOSECONDS.toMillis(leaseNanos) / 3);
        long jitter = ThreadLocalRandom.current().nextLong(1, Math.max(2, Math.min(bound / 10, 50) + 1));
        return bound + jitter;
    }
}
