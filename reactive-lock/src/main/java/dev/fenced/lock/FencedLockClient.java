package dev.fenced.lock;

import dev.fenced.lock.internal.DroppedLeases;
import java.time.Duration;
import java.util.function.Function;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A client for fenced distributed locks on Redis or Valkey.
 *
 * <pre>{@code
 * FencedLockClient locks = FencedLockClient.builder()
 *         .redisUri("redis://127.0.0.1:6379")
 *         .build();
 *
 * Flux<Receipt> receipts = locks.withLease("invoice:42",
 *         lease -> invoices.settle(42, lease.token()));
 * }</pre>
 *
 * <p>Every method is cold: nothing is sent until subscription, and bad arguments or a closed client are
 * reported as an error signal before any I/O. No method blocks, except {@link #close()}. Signals of an
 * acquire arrive on the driver's I/O thread or on the renewal scheduler; do not block there.
 *
 * <p>Thread-safe. Create one client per application (per Redis deployment) and share it.
 */
public interface FencedLockClient extends AutoCloseable {

    /**
     * Starts a builder with the documented defaults.
     *
     * @return a new builder
     */
    static FencedLockClientBuilder builder() {
        return new FencedLockClientBuilder();
    }

    /**
     * Makes Reactor release a lease that a subscriber drops. Every client checks when it is built that this
     * hook is in place, and installs it again if other code removed it ({@code Hooks.resetOnNextDropped()});
     * calling this is needed only to install it earlier, or again after such a reset once clients exist.
     *
     * <p>A subscriber that is gone in the very moment its lease arrives can drop the lease: a lambda subscriber
     * ({@code acquire(name).subscribe(lease -> ...)}) disposed then, or {@code acquire(name).timeout(d)} racing
     * the reply (Reactor's timeout operator drops the late value). Reactor hands such a value to
     * {@code Hooks.onNextDropped}; the hook installed here releases it if it is a lease (one handler in the
     * JVM, added again only if it was removed; Reactor's hook is cumulative, so other handlers keep running;
     * values other than leases are ignored, and Reactor's default debug log of dropped values stops). A value
     * that Reactor discards without any hook (the loser of {@code Mono.firstWithSignal}) is released once the
     * garbage collector has collected it (see {@link FencedLease}), and in any case bounded by
     * {@link FencedLockClientBuilder#maxHold(Duration)}. Bound a wait with
     * {@link AcquireOptions#withMaxWait(Duration)}, not with {@code timeout()}.
     */
    static void releaseLeasesDroppedBySubscribers() {
        DroppedLeases.installGlobalHook();
    }

    /**
     * Acquires a lease on {@code name}, waiting up to the client's {@linkplain FencedLockClientBuilder#maxWait(Duration)
     * maximum wait} if the lock is held.
     *
     * <p>Subscribing sends the acquire; while the lock is held by someone else it waits for a release
     * notification or a timer bounded by the holder's remaining lease, without blocking a thread.
     * Cancelling before the lease is emitted leaves no lock behind: an attempt already sent is undone by
     * an owner-checked release. After emission the lease is the subscriber's to
     * {@linkplain FencedLease#release() release}; {@link #withLease(String, Function)} does that for you.
     *
     * <p>If the subscriber's Reactor Context already holds a lease on {@code name} (inside
     * {@code withLease}), that lease is emitted again, same token; releasing it through this view is a
     * no-op reported as {@link ReleaseOutcome#RETAINED}.
     *
     * @param name the lock name: not blank, at most 1024 characters, no control characters or braces
     * @return the lease; errors: {@link LockAcquireTimeoutException}, {@link LockServiceException},
     *     {@link LockClientClosedException}, {@link IllegalArgumentException} for a bad name
     */
    Mono<FencedLease> acquire(String name);

    /**
     * Acquires a lease on {@code name} with per-call options, as {@link #acquire(String)} does. With a
     * maximum wait of zero ({@link AcquireOptions#tryOnce()}) a single attempt is made and the result is
     * empty when the lock is held.
     *
     * @param name the lock name
     * @param options the lease time and maximum wait of this call
     * @return the lease, or empty for a single attempt on a held lock
     */
    Mono<FencedLease> acquire(String name, AcquireOptions options);

    /**
     * Makes a single attempt: the same as {@code acquire(name, AcquireOptions.tryOnce())}.
     *
     * @param name the lock name
     * @return the lease, or empty when the lock is held
     */
    Mono<FencedLease> tryAcquire(String name);

    /**
     * Makes a single attempt on each of {@code names} at once: the same as
     * {@code tryAcquireAll(names, AcquireOptions.defaults())}.
     *
     * @param names the lock names: distinct, at most 256
     * @return the batch: a lease per free name, and the busy names
     */
    default Mono<FencedLeaseBatch> tryAcquireAll(java.util.Collection<String> names) {
        return tryAcquireAll(names, AcquireOptions.defaults());
    }

    /**
     * Makes a single attempt on each of {@code names} at once, as {@link #tryAcquire(String)} does for one name: each
     * free lock is granted a lease of its own (its own token, renewal and {@link FencedLease#lost()} signal, exactly
     * as a single acquire's), and each held lock is reported {@linkplain FencedLeaseBatch#busy() busy}; nobody waits.
     * The clients of {@link #builder()} on one Redis server (directly or through Sentinel, without replica
     * acknowledgement) send one acquire-script call for the whole batch; on a Redis Cluster (whose names live in
     * many slots), with replica acknowledgement, and on PostgreSQL each name is a call of its own, all sent at once.
     * Release the batch with {@link FencedLeaseBatch#releaseAll()}.
     *
     * <ul>
     *   <li>The options' lease time and maximum hold apply to every lease; their maximum wait is not used (one
     *       attempt per name).</li>
     *   <li>An empty collection gives an empty batch, without I/O. More than
     *       256 names, a name twice, or a bad name is an
     *       {@link IllegalArgumentException} before any I/O; a name whose lease the subscriber's Reactor Context
     *       already holds (inside {@code withLease}) is an {@link IllegalStateException}: a batch reuses no
     *       enclosing lease.</li>
     *   <li>Cancelling before the batch is emitted leaves no lock behind: leases granted so far are released and
     *       attempts still in flight are undone when their reply comes. If the attempt on one name fails (the
     *       lock service cannot be reached), the batch fails with that error and releases what it was granted.</li>
     *   <li>A closed client fails with {@link LockClientClosedException}.</li>
     * </ul>
     *
     * <p>This default implementation makes the attempts through {@link #tryAcquire(String)}'s path
     * ({@code acquire(name, options.withMaxWait(Duration.ZERO))}), all subscribed at once; the clients of
     * {@link #builder()} override it.
     *
     * @param names the lock names: distinct, at most 256
     * @param options the lease time and maximum hold of every lease
     * @return the batch: a lease per free name, and the busy names, in the order of {@code names}
     */
    default Mono<FencedLeaseBatch> tryAcquireAll(java.util.Collection<String> names, AcquireOptions options) {
        Object checked = dev.fenced.lock.internal.LeaseBatches.namesOrProblem(names, options);
        if (checked instanceof RuntimeException problem) {
            return Mono.error(problem);
        }
        @SuppressWarnings("unchecked")
        java.util.List<String> ordered = (java.util.List<String>) checked;
        AcquireOptions once = options.withMaxWait(Duration.ZERO);
        return Mono.deferContextual(ctx -> {
            IllegalStateException nested = dev.fenced.lock.internal.LeaseBatches.heldByScope(ctx, ordered,
                    lease -> true);
            return nested != null ? Mono.error(nested)
                    : dev.fenced.lock.internal.LeaseBatches.collect(ordered, name -> acquire(name, once));
        });
    }

    /**
     * Acquires {@code name}, runs {@code work} with the lease, and releases the lease when the work
     * completes, errors or is cancelled.
     *
     * <p>If the lease is lost while the work runs, the work is cancelled and the result fails with
     * {@link LeaseLostException}. The lease is in the Reactor Context of the work ({@link
     * FencedLease#current(String)}), so operators such as the R2DBC fencing operator find its token. A
     * nested {@code withLease} on a name the Context already holds reuses that lease and does not
     * release it.
     *
     * @param name the lock name
     * @param work the work to run while holding the lease
     * @param <T> the type of the results
     * @return the results of the work
     */
    <T> Flux<T> withLease(String name, Function<? super FencedLease, ? extends Publisher<T>> work);

    /**
     * As {@link #withLease(String, Function)}, with per-call options. With a maximum wait of zero the
     * work does not run and the result completes empty when the lock is held.
     *
     * @param name the lock name
     * @param options the lease time and maximum wait of this call
     * @param work the work to run while holding the lease
     * @param <T> the type of the results
     * @return the results of the work
     */
    <T> Flux<T> withLease(String name, AcquireOptions options, Function<? super FencedLease, ? extends Publisher<T>> work);

    /**
     * Runs one tick of a job under its lock: skip if held (by default), hold at most lockAtMostFor, keep the lock
     * at least lockAtLeastFor (see {@link FencedJob}).
     *
     * <p>Subscribing acquires {@code job.name()} with {@link FencedJob#acquireOptions()}, never reusing a lease of
     * an enclosing scope (a tick inside a {@code withLease} of the same name is skipped, not nested), and skips at
     * once if a tick of the same job is still running in this client (the second tick is skipped, not queued).
     * With the lease, it calls {@code work} and subscribes to its publisher with the lease in the Reactor Context
     * (so {@link FencedLease#current(String)} and fenced writes see it), and waits for it to complete. Then:
     * <ul>
     *   <li>the job completed: the lease is released, or with a lockAtLeastFor left to expire that long after the
     *       grant ({@link FencedLease#releaseNoSoonerThan(Duration)}); {@link JobOutcome.Status#RAN};</li>
     *   <li>the job failed (or {@code work} threw): the same release; {@link JobOutcome.Status#FAILED} with the
     *       error;</li>
     *   <li>the lease was lost: the job is cancelled; {@link JobOutcome.Status#LOST}, or
     *       {@link JobOutcome.Status#CUT_OFF} when lockAtMostFor was reached (the lock is released there);</li>
     *   <li>the lock is held: {@link JobOutcome.Status#SKIPPED}; the lock service could not be reached or the client
     *       is closed: {@link JobOutcome.Status#UNAVAILABLE}, logged with the reason (at WARN; at DEBUG for a closed
     *       client, as during shutdown).</li>
     * </ul>
     * The returned Mono never errors (only a {@code null} argument is an error), so a schedule built on it keeps
     * running. Cancelling it cancels the job and releases the lease at once (no lockAtLeastFor tail: the job did
     * not end). Closing the client while a job runs loses its lease ({@link LossReason#CLIENT_CLOSED}): the job is
     * cancelled and the lease released. Each tick is reported to the client's {@link LockObserver#jobStarted}. The
     * job runs on the thread that emitted the lease (the driver's I/O thread or the client's emission scheduler):
     * blocking work must move itself off it ({@code subscribeOn(Schedulers.boundedElastic())}).
     *
     * <p>This default implementation runs the job through this client's public API, without observing it and
     * without the check for a tick still running; the clients of {@link #builder()} do both.
     *
     * @param job the job
     * @param work makes the job's publisher; called once per tick, after the lock was taken
     * @return the tick's outcome
     */
    default Mono<JobOutcome> runJob(FencedJob job, java.util.function.Supplier<? extends Publisher<?>> work) {
        return dev.fenced.lock.internal.JobRunner.standalone(this).run(job, work);
    }

    /**
     * Runs one tick of a job whose work is a cold publisher (a {@code Mono} or {@code Flux} subscribed once per tick),
     * as {@link #runJob(FencedJob, java.util.function.Supplier)} does.
     *
     * @param job the job
     * @param work the job's publisher, subscribed after the lock was taken
     * @return the tick's outcome
     */
    default Mono<JobOutcome> runJob(FencedJob job, Publisher<?> work) {
        if (work == null) {
            return Mono.error(new NullPointerException("work must not be null"));
        }
        return runJob(job, () -> work);
    }

    /**
     * Sends one round trip to the lock service ({@code PING} on the lock connection), for health checks.
     *
     * @return the round-trip time; {@link LockServiceException} if the service cannot be reached within the
     *     command timeout, {@link LockClientClosedException} once closed
     */
    Mono<Duration> ping();

    /**
     * The number of leases this client holds now (acquired, not yet released or lost).
     *
     * @return the count
     */
    int heldLeases();

    /**
     * The fleet view: every lock under this client's key prefix whose name matches {@code pattern} and that is
     * held now, by any instance, read from the lock server. In the pattern {@code *} stands for any run of
     * characters and every other character for itself ({@code ?}, {@code [}, {@code %}, {@code _} and
     * {@code \} included: they are escaped for the server), so {@code "invoice:*"} lists the invoice locks and
     * {@code "*"} all of them; no pattern reaches keys outside the prefix.
     *
     * <p>Subscribing starts reading; locks come in pages of at most 500 ({@code SCAN} with a bounded
     * {@code COUNT} on Redis, each primary of a cluster in turn, never {@code KEYS}; keyset pages of the lease
     * table on PostgreSQL), and a page is read only when the subscriber asks for more than the pages already
     * read hold, so memory stays bounded whatever the number of locks: a subscriber that requests one at a time
     * holds at most one page beyond the one it reads. Cancelling stops reading. A lock held during the whole
     * listing is listed at least once on one Redis server and on PostgreSQL (once on PostgreSQL; on Redis
     * {@code SCAN} may return a key twice while the server resizes its key table, so two pages may repeat a lock);
     * on a Redis Cluster while slots move (a reshard, a failover) such a lock may also be missed, when its slot
     * moves to a primary already scanned, or listed twice. One taken or released meanwhile may be listed or not.
     * Not a consistent snapshot, then: read it as "locks held about now". The order is the
     * server's (the table's order of lock ids on PostgreSQL), not sorted by name on Redis. Signals arrive on the
     * driver's I/O thread; do not block there. Owner ids are never shown.
     *
     * @param pattern the names to list: not empty, at most 1024 characters, no control characters or braces
     * @return the held locks; errors: {@link LockServiceException}, {@link LockClientClosedException},
     *     {@link IllegalArgumentException} for a bad pattern
     */
    Flux<LockInfo> locks(String pattern);

    /**
     * One lock of the fleet view ({@link #locks(String)}), by its exact name: one read on the lock server.
     *
     * @param name the lock name
     * @return the lock, or empty when nobody holds it; errors as {@link #locks(String)},
     *     {@link IllegalArgumentException} for a bad name
     */
    Mono<LockInfo> lock(String name);

    /**
     * Breaks the lock {@code name}, whoever holds it, so that the broken holder's later fenced writes are refused
     * by storage. In one atomic step on the lock server (a script on Redis, one statement on PostgreSQL) the
     * lock is deleted and the name's token counter is left at least at the broken token, so the next grant's token
     * is above it in either {@link TokenScheme}; waiters are notified. It needs no owner id and does not depend on
     * this client holding anything.
     *
     * <p>What it guarantees: the broken holder's lease is lost ({@link LossReason#NOT_HELD}) at its next
     * renewal at the latest (its renewals and its release compare owner and token, and find neither); the next
     * holder's token is above the broken one, so once the next holder has written to fenced storage, the storage
     * refuses every write of the broken holder ({@link StaleFencingTokenException}); a fenced write that checks the
     * lease row in its transaction ({@code FencedWrite.checkLease} on PostgreSQL) is refused at once. What it does
     * not: writes the broken holder made before, or without the token (files, e-mails, calls to other services), are
     * not undone or prevented; until the next holder writes, a token-only fenced write of the broken holder is
     * still accepted (the storage has seen no newer token); and the broken holder's work goes on until its client
     * notices the loss.
     *
     * <p>It breaks whoever holds the lock when the call arrives: a retried call (its first answer lost) breaks the
     * next, legitimate holder too. To break one holder only, use {@link #forceRelease(String, long, String)} with
     * the token the fleet view showed.
     *
     * <p>Idempotent: a lock that is not held (free, expired, broken already) changes nothing and answers
     * {@link ForceReleaseResult.Outcome#NOT_HELD}, not an error. Each call is logged (WARN when a lock was broken,
     * with the lock name, the broken token, the holder label and {@code reason}; INFO otherwise) and reported to
     * the {@linkplain LockObserver#forceReleased observer}. Cold: nothing is sent until subscription.
     *
     * @param name the lock name
     * @param reason who breaks it and why, for the log: not blank, at most 500 characters, no control characters,
     *     Unicode format characters or line/paragraph separators
     * @return the outcome; errors: {@link LockServiceException}, {@link LockClientClosedException},
     *     {@link IllegalArgumentException} for a bad name or reason
     */
    Mono<ForceReleaseResult> forceRelease(String name, String reason);

    /**
     * Breaks a lock only while it holds {@code expectedToken}, in one atomic step, with the guarantees of
     * {@link #forceRelease(String, String)}. A lock that is free, or held with another token (the next holder's, once
     * the expected one was broken or released), changes nothing and answers {@link ForceReleaseResult.Outcome#NOT_HELD}:
     * retrying this call is safe. Logged and observed as the other variant; cold.
     *
     * @param name the lock name
     * @param expectedToken the token of the holder to break, as {@link #locks} or {@link #lock} showed it: positive
     * @param reason who breaks it and why, for the log: not blank, at most 500 characters, no control characters,
     *     Unicode format characters or line/paragraph separators
     * @return the outcome; errors: {@link LockServiceException}, {@link LockClientClosedException},
     *     {@link IllegalArgumentException} for a bad name, token or reason
     */
    Mono<ForceReleaseResult> forceRelease(String name, long expectedToken, String reason);

    /**
     * Closes the client: new acquires fail with {@link LockClientClosedException}, waits in progress end
     * with that error, held leases are lost (their {@link FencedLease#lost()} signals
     * {@link LossReason#CLIENT_CLOSED}) and released, in parallel, before the store stops taking commands (so
     * another client can take their locks at once; a release that fails is logged with the lock name and its
     * cause, and that lock expires with its lease), undos of abandoned acquires waiting out a back-off run at
     * once, the renewals, releases and undos still in flight get up to the command timeout to finish (a
     * {@link FencedLease#releaseNoSoonerThan} tail being written, which may wait for a renewal in flight first, up
     * to two command timeouts, so that the lock stays taken for the whole tail), then the connections close. On PostgreSQL an acquire that failed without a reply (a timeout, a reset) may still
     * take the lock in the database for one command timeout plus 1 s after its failure (a statement waiting on
     * a row lock whose cancel could not be delivered): close goes on undoing it, at most 200 ms apart, until
     * that window has passed, so that no late grant holds a lock for nobody after close; an acquire that
     * fails during the close gets its window too. A lease granted while the client closes is
     * released again and its acquire fails with {@link LockClientClosedException}. A Redis client passed to
     * the builder is left open; one created by the builder is shut down. Each step is bounded, so the
     * completion comes within about twice the command timeout whatever Redis does; on PostgreSQL the undo
     * window adds up to one command timeout plus 1 s to that. Idempotent: every call returns the same
     * completion.
     *
     * @return completes when the client is closed; never errors
     */
    Mono<Void> closeLater();

    /**
     * Closes the client as {@link #closeLater()} does and waits, at most ten seconds, for it to finish (past
     * that, closing goes on in the background and a warning is logged). On PostgreSQL the undo window of
     * {@link #closeLater()} fits in those ten seconds for an acquire that failed before the close with a
     * command timeout up to 8 s, and for one that fails during the close with a command timeout up to 4 s;
     * otherwise close() may return while that undo still runs in the background, and a JVM that exits then may
     * leave that lock taken, by nobody, until its lease runs out (subscribe to {@link #closeLater()} and wait
     * for it to rule that out). Never throws, except
     * {@link IllegalStateException} when called on a non-blocking thread: this method blocks the calling
     * thread, so call it on shutdown, never on Reactor's non-blocking threads or Netty's (such as
     * Lettuce's); use {@link #closeLater()} there.
     */
    @Override
    void close();
}
