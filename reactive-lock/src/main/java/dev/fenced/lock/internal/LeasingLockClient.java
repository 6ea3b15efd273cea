package dev.fenced.lock.internal;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.ForceReleaseResult;
import dev.fenced.lock.LockInfo;
import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.LockAcquireTimeoutException;
import dev.fenced.lock.LockClientClosedException;
import dev.fenced.lock.LockObserver;
import dev.fenced.lock.LockServiceException;
import dev.fenced.lock.LossReason;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;
import reactor.util.Logger;
import reactor.util.Loggers;
import reactor.util.retry.Retry;

/**
 * The lock client over any {@link LeaseStore}: the lease lifecycle (acquire, wait, renewal, loss,
 * release, cancel-safety, nesting) knows nothing of Redis. Thread-safe.
 */
public final class LeasingLockClient implements FencedLockClient {

    private static final Logger log = Loggers.getLogger(LeasingLockClient.class);
    private static final Duration CLOSE_WAIT = Duration.ofSeconds(10);
    private static final Duration STORE_CLOSE_WAIT = Duration.ofSeconds(3);

    private final LeaseRuntime runtime;
    private final Renewer renewer;
    private final LeaseRegistry registry = new LeaseRegistry();
    private final Waiters waiters;
    private final Undos undos;
    private final AcquireAttempt attempts;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final Mono<Void> closeResult;
    private final Disposable serverChanges;
    private final JobRunner jobs;

    private LeasingLockClient(LeaseStore store, ClientSettings settings) {
        this.runtime = LeaseRuntime.of(settings, store);
        this.renewer = new Renewer(runtime);
        this.waiters = new Waiters(store);
        this.undos = new Undos(runtime, closed::get);
        this.attempts = new AcquireAttempt(runtime, undos, this::grant, closed::get);
        this.closeResult = Mono.defer(this::doClose).cache();
        settings.observer().heldLeases(renewer::count);
        this.serverChanges = store.serverChanges().subscribe(change -> loseAll());
        this.jobs = new JobRunner(this, settings.observer(), runtime::now, this::ownedByThisClient, true);
    }

    /** A grant becomes a held lease, renewed from now on. */
    private HeldLease grant(String name, String owner, long token, long leaseNanos, long capNanos, long sentAt,
            long repliedAt) {
        long renewEvery = runtime.settings().renewEveryNanos(leaseNanos);
        // With a hold cap shorter than the lease time, the store was asked for the cap (in whole ms) only.
        long granted = capNanos > 0 && capNanos < leaseNanos
                ? TimeUnit.MILLISECONDS.toNanos(TimeUnit.NANOSECONDS.toMillis(capNanos)) : leaseNanos;
        long deadline = sentAt + granted - ClientSettings.driftNanos(granted);
        HeldLease lease = new HeldLease(runtime, renewer, registry, waiters, name, owner, token, leaseNanos, renewEvery,
                capNanos > 0 && deadline - (sentAt + capNanos) > 0 ? sentAt + capNanos : deadline, sentAt + renewEvery,
                repliedAt);
        if (capNanos > 0) {
            lease.capped = true;
            lease.capAt = sentAt + capNanos;
            lease.capLimited = granted < leaseNanos;
        }
        Duration maxHold = runtime.settings().maxHold();
        if (maxHold != null) {
            lease.bounded = true;
            lease.holdUntil = sentAt + maxHold.toNanos();
        }
        registry.add(lease);
        renewer.track(lease);
        return lease;
    }

    /** Every held lease is lost at once: the server that held them changed. */
    private void loseAll() {
        for (HeldLease lease : registry.snapshot()) {
            lease.loseToServerChange();
        }
    }

    /**
     * A client over the given store.
     *
     * @param store the store; closed with the client
     * @param settings the settings
     * @return the client
     */
    public static LeasingLockClient create(LeaseStore store, ClientSettings settings) {
        // A lease dropped below the client (a lambda subscriber disposed as it arrives, timeout() racing the
        // reply) reaches only Reactor's global hook: release it there rather than renew it for ever.
        DroppedLeases.installGlobalHook();
        return new LeasingLockClient(Objects.requireNonNull(store, "store"), Objects.requireNonNull(settings, "settings"));
    }

    @Override
    public Mono<FencedLease> acquire(String name) {
        return acquire(name, AcquireOptions.defaults());
    }

    @Override
    public Mono<FencedLease> tryAcquire(String name) {
        return acquire(name, AcquireOptions.tryOnce());
    }

    @Override
    public Mono<FencedLease> acquire(String name, AcquireOptions options) {
        String problem = KeyLayout.problemWithName(name);
        if (!problem.isEmpty()) {
            return Mono.error(new IllegalArgumentException(problem));
        }
        if (options == null) {
            return Mono.error(new NullPointerException("options must not be null"));
        }
        ClientSettings settings = runtime.settings();
        Duration maxWait = options.maxWait() != null ? options.maxWait() : settings.maxWait();
        Duration leaseTime = leaseTimeOf(options);
        String leaseProblem = settings.problemWithLeaseTime(leaseTime);
        if (!leaseProblem.isEmpty()) {
            return Mono.error(new IllegalArgumentException(leaseProblem));
        }
        long leaseNanos = leaseTime.toNanos();
        long capNanos = capNanosOf(options);
        return Mono.deferContextual(ctx -> {
            if (closed.get()) {
                return Mono.error(LockClientClosedException.of(name));
            }
            if (renewer.schedulerDisposed()) {
                return Mono.error(schedulerRejected(name));
            }
            FencedLease enclosing = LeaseContext.find(ctx, name);
            if (enclosing != null && ownedByThisClient(enclosing)) {
                return reuse(enclosing);
            }
            // The application gets the lease's handle: collected, it releases the lease (LeaseHandle).
            Mono<FencedLease> acquire = (maxWait.isZero()
                    ? attempts.run(name, leaseNanos, capNanos).mapNotNull(AcquireAttempt.Result::lease)
                    : AcquireWaiter.waitFor(runtime, waiters, attempts, name, leaseNanos, capNanos, maxWait, settings.maxWaitersPerLock()))
                    .map(HeldLease::handle);
            Scheduler emission = settings.emissionScheduler();
            return observed(name, emission == null ? acquire : acquire.publishOn(emission));
        }).doOnDiscard(FencedLease.class, LeasingLockClient::releaseDiscarded)
                .contextWrite(DroppedLeases::releaseIn);
    }

    /**
     * One store call for the whole batch ({@link LeaseStore#acquireAll}): each name is an attempt of its own (its
     * owner id, floor, undo and grant, as {@link #tryAcquire(String)}'s), whose store call is its part of the batch's
     * call ({@link BatchedAcquires}); the batch's {@code releaseAll} is one store call too
     * ({@link LeaseStore#releaseAll}, {@link BatchedReleases}).
     */
    @Override
    public Mono<dev.fenced.lock.FencedLeaseBatch> tryAcquireAll(java.util.Collection<String> names, AcquireOptions options) {
        Object checked = LeaseBatches.namesOrProblem(names, options);
        if (checked instanceof RuntimeException problem) {
            return Mono.error(problem);
        }
        @SuppressWarnings("unchecked")
        List<String> ordered = (List<String>) checked;
        ClientSettings settings = runtime.settings();
        Duration leaseTime = leaseTimeOf(options);
        String leaseProblem = settings.problemWithLeaseTime(leaseTime);
        if (!leaseProblem.isEmpty()) {
            return Mono.error(new IllegalArgumentException(leaseProblem));
        }
        long leaseNanos = leaseTime.toNanos();
        long capNanos = capNanosOf(options);
        return Mono.deferContextual(ctx -> {
            String first = ordered.isEmpty() ? "" : ordered.get(0);
            if (closed.get()) {
                return Mono.error(LockClientClosedException.of(first));
            }
            if (renewer.schedulerDisposed()) {
                return Mono.error(schedulerRejected(first));
            }
            IllegalStateException nested = LeaseBatches.heldByScope(ctx, ordered, this::ownedByThisClient);
            if (nested != null) {
                return Mono.error(nested);
            }
            BatchedAcquires call = new BatchedAcquires(runtime.store(), runtime.inFlight(), ordered.size());
            Mono<dev.fenced.lock.FencedLeaseBatch> batch = LeaseBatches.collect(ordered, name -> observed(name,
                            attempts.run(name, leaseNanos, capNanos, call.sender(name))
                                    .mapNotNull(AcquireAttempt.Result::lease)
                                    .map(HeldLease::handle)), leases -> LeaseBatches.releaseTogether(runtime.store(), leases))
                    .doOnCancel(call::sendNow);
            Scheduler emission = settings.emissionScheduler();
            return emission == null ? batch : batch.publishOn(emission);
        }).doOnDiscard(dev.fenced.lock.FencedLeaseBatch.class, LeaseBatches::releaseDiscarded)
                .contextWrite(DroppedLeases::releaseIn);
    }

    /** The lease time an acquire asks for: the options' own, else the client's. */
    private Duration leaseTimeOf(AcquireOptions options) {
        return options.leaseTime() != null ? options.leaseTime() : runtime.settings().leaseTime();
    }

    /** The hold cap an acquire asks for, in nanoseconds; 0 for none. */
    private static long capNanosOf(AcquireOptions options) {
        return options.maxHold() != null ? options.maxHold().toNanos() : 0;
    }

    /** An acquire refused up front: a lease granted now could never be renewed. */
    private static RejectedExecutionException schedulerRejected(String name) {
        return new RejectedExecutionException("Cannot acquire lock '" + name + "': the lock client's scheduler rejected "
                + "work (it is disposed), so nothing could renew a lease. An injected scheduler must outlive the client: "
                + "StepVerifier.withVirtualTime disposes its scheduler when the verification ends, so build a client per "
                + "verification, or inject VirtualTimeScheduler.create() and dispose it after the client is closed");
    }

    /** A lease discarded on its way to the subscriber is released (a nested view is its scope's to release). */
    private static void releaseDiscarded(FencedLease lease) {
        HeldLease held = HeldLease.of(lease);
        if (held != null) {
            held.releaseQuietly().subscribe();
        }
    }

    private Mono<FencedLease> observed(String name, Mono<FencedLease> acquire) {
        LockObserver observer = runtime.observer();
        if (observer == LockObserver.NONE) {
            return acquire;
        }
        return Mono.defer(() -> {
            LockObserver.AcquireObservation observation = observer.acquireStarted(name);
            return acquire
                    .doOnSuccess(lease -> observation.ended(lease != null
                            ? LockObserver.AcquireOutcome.ACQUIRED : LockObserver.AcquireOutcome.BUSY, null))
                    .doOnError(e -> observation.ended(e instanceof LockAcquireTimeoutException
                            ? LockObserver.AcquireOutcome.TIMED_OUT : LockObserver.AcquireOutcome.FAILED, e))
                    .doOnCancel(() -> observation.ended(LockObserver.AcquireOutcome.CANCELLED, null));
        });
    }

    /** A lease of another client (another prefix or Redis) on the same name is a different lock. */
    private boolean ownedByThisClient(FencedLease lease) {
        FencedLease root = lease instanceof NestedLease nested ? nested.outer() : lease;
        HeldLease held = HeldLease.of(root);
        return held != null && held.runtime() == runtime;
    }

    private static Mono<FencedLease> reuse(FencedLease enclosing) {
        if (enclosing.isHeld()) {
            return Mono.just(new NestedLease(enclosing));
        }
        FencedLease root = enclosing instanceof NestedLease nested ? nested.outer() : enclosing;
        HeldLease held = HeldLease.of(root);
        LeaseLostException loss = held != null ? held.loss() : null;
        return Mono.error(loss != null ? loss : LeaseLostException.of(root.name(), root.token(), LossReason.EXPIRED));
    }

    @Override
    public <T> Flux<T> withLease(String name, Function<? super FencedLease, ? extends Publisher<T>> work) {
        return withLease(name, AcquireOptions.defaults(), work);
    }

    @Override
    public <T> Flux<T> withLease(String name, AcquireOptions options,
            Function<? super FencedLease, ? extends Publisher<T>> work) {
        if (work == null) {
            return Flux.error(new NullPointerException("work must not be null"));
        }
        Mono<FencedLease> acquire = acquire(name, options);
        return Flux.deferContextual(ctx -> {
            FencedLease enclosing = LeaseContext.find(ctx, name);
            if (enclosing != null && ownedByThisClient(enclosing)) {
                // Nested scope: the enclosing scope releases the lease.
                return acquire.flatMapMany(lease -> guarded(lease, work));
            }
            return Flux.usingWhen(acquire,
                    lease -> guarded(lease, work),
                    LeasingLockClient::endScope,
                    (lease, error) -> endScope(lease),
                    LeasingLockClient::endScope);
        });
    }

    private static Mono<Void> endScope(FencedLease lease) {
        HeldLease held = HeldLease.of(lease);
        // The handle stays reachable until the scope's release has ended.
        return held != null ? held.releaseQuietly().doFinally(s -> java.lang.ref.Reference.reachabilityFence(lease))
                : lease.release().then();
    }

    /** Runs the work with the lease in its Context; cancels it and fails when the lease is lost. */
    private static <T> Flux<T> guarded(FencedLease lease, Function<? super FencedLease, ? extends Publisher<T>> work) {
        return Flux.defer(() -> {
            AtomicReference<@Nullable LeaseLostException> loss = new AtomicReference<>();
            Publisher<T> body = Objects.requireNonNull(work.apply(lease), "work returned null");
            // Loss is signalled as a value: takeUntilOther would not cancel the work on an error.
            return Flux.from(body)
                    .contextWrite(c -> LeaseContext.with(c, lease))
                    // Only a loss stops the work: lost() also completes (empty) when the lease is released.
                    .takeUntilOther(lease.lost().doOnNext(loss::set).switchIfEmpty(Mono.never()))
                    .concatWith(Mono.defer(() -> {
                        LeaseLostException e = loss.get();
                        return e == null ? Mono.empty() : Mono.error(e);
                    }));
        });
    }

    @Override
    public Mono<dev.fenced.lock.JobOutcome> runJob(dev.fenced.lock.FencedJob job, java.util.function.Supplier<? extends Publisher<?>> work) {
        return jobs.run(job, work);
    }

    /**
     * Makes the next acquire of {@code name} take a token above {@code floor}: used when storage has seen
     * a token that the lock service no longer knows of.
     *
     * @param name the lock name
     * @param floor the token to exceed
     */
    public void raiseFloor(String name, long floor) {
        runtime.floors().raise(name, floor);
    }

    @Override
    public Mono<Duration> ping() {
        return Mono.defer(() -> {
            if (closed.get()) {
                return Mono.error(LockClientClosedException.of(""));
            }
            long start = System.nanoTime();
            return runtime.store().ping().then(Mono.fromCallable(() -> Duration.ofNanos(System.nanoTime() - start)));
        });
    }

    @Override
    public int heldLeases() {
        return renewer.count();
    }

    /** The longest accepted reason of a force-release, in characters. */
    static final int MAX_REASON_LENGTH = 500;

    @Override
    public Flux<LockInfo> locks(String pattern) {
        String problem = NamePattern.problemWith(pattern);
        if (!problem.isEmpty()) {
            return Flux.error(new IllegalArgumentException(problem));
        }
        NamePattern names = NamePattern.of(pattern);
        return Flux.defer(() -> {
            if (closed.get()) {
                return Flux.error(LockClientClosedException.of(""));
            }
            long[] listed = new long[1]; // one subscriber's count: signals of one Flux are serial
            return runtime.store().locks(names)
                    .map(this::info)
                    .doOnNext(lock -> listed[0]++)
                    .doOnComplete(() -> runtime.observer().fleetListed(listed[0]));
        });
    }

    @Override
    public Mono<LockInfo> lock(String name) {
        String problem = KeyLayout.problemWithName(name);
        if (!problem.isEmpty()) {
            return Mono.error(new IllegalArgumentException(problem));
        }
        return Mono.defer(() -> closed.get() ? Mono.error(LockClientClosedException.of(name))
                : runtime.store().lock(name).map(this::info));
    }

    private LockInfo info(LeaseStore.LockState state) {
        return new LockInfo(state.name(), state.token(), Duration.ofMillis(state.remainingMillis()), state.holderLabel(),
                waiters.waiting(state.name()));
    }

    @Override
    public Mono<ForceReleaseResult> forceRelease(String name, String reason) {
        return forceRelease(name, 0, reason, true);
    }

    @Override
    public Mono<ForceReleaseResult> forceRelease(String name, long expectedToken, String reason) {
        return forceRelease(name, expectedToken, reason, false);
    }

    /** A force-release of {@code expectedToken}, or of any token when {@code anyToken}. */
    private Mono<ForceReleaseResult> forceRelease(String name, long expectedToken, String reason, boolean anyToken) {
        String problem = KeyLayout.problemWithName(name);
        if (problem.isEmpty() && !anyToken && expectedToken <= 0) {
            problem = "expectedToken must be positive, was " + expectedToken;
        }
        if (problem.isEmpty()) {
            problem = problemWithReason(reason);
        }
        if (!problem.isEmpty()) {
            return Mono.error(new IllegalArgumentException(problem));
        }
        return Mono.defer(() -> {
            if (closed.get()) {
                return Mono.error(LockClientClosedException.of(name));
            }
            return runtime.store().breakLock(name, anyToken ? 0 : expectedToken).map(broken -> {
                ForceReleaseResult.Outcome outcome = broken.held()
                        ? ForceReleaseResult.Outcome.RELEASED : ForceReleaseResult.Outcome.NOT_HELD;
                if (broken.held()) {
                    log.warn("Force-released lock '{}' (token {}, holder {}): {}", name, broken.token(),
                            broken.holderLabel() == null ? "unlabelled" : "'" + broken.holderLabel() + "'", reason);
                    HeldLease mine = registry.held(name);
                    if (mine != null && mine.token() == broken.token()) {
                        mine.markLost(LossReason.NOT_HELD); // this client's own lease: lost now, not at its renewal
                    }
                } else {
                    if (anyToken) {
                        log.info("Force-release of lock '{}' found it not held: {}", name, reason);
                    } else {
                        log.info("Force-release of lock '{}' found it not held with token {}: {}", name, expectedToken,
                                reason);
                    }
                }
                runtime.observer().forceReleased(name, outcome, reason);
                return new ForceReleaseResult(name, outcome, broken.token(), broken.holderLabel(), reason);
            });
        });
    }

    /** Describes what is wrong with the reason of a force-release; empty if nothing. */
    static String problemWithReason(@Nullable String reason) {
        if (reason == null) {
            return "reason must not be null";
        }
        if (reason.isBlank()) {
            return "reason must not be blank: say who breaks the lock and why";
        }
        if (reason.length() > MAX_REASON_LENGTH) {
            return "reason must be at most " + MAX_REASON_LENGTH + " characters, was " + reason.length();
        }
        for (int i = 0; i < reason.length(); i++) {
            if (Character.isISOControl(reason.charAt(i))) {
                // It goes to the log as it is: no line breaks that could forge log lines.
                return "reason must not contain control characters, was '" + reason.replaceAll("\\p{Cntrl}", "?") + "'";
            }
        }
        int invisible = HolderLabels.invisible(reason);
        if (invisible >= 0) {
            return "reason must not contain Unicode format or line/paragraph separator characters, found "
                    + HolderLabels.codePoint(invisible) + " in '" + HolderLabels.masked(reason) + "'";
        }
        return "";
    }

    @Override
    public Mono<Void> closeLater() {
        return closeResult;
    }

    @Override
    public void close() {
        if (Schedulers.isInNonBlockingThread() || runtime.store().onIoThread()) {
            throw new IllegalStateException("close() blocks; on a non-blocking thread (" + Thread.currentThread().getName()
                    + ") subscribe to closeLater() instead");
        }
        try {
            closeLater().toFuture().get(CLOSE_WAIT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            log.warn("Closing the lock client took more than {} s; it goes on in the background", CLOSE_WAIT.toSeconds());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (ExecutionException e) {
            log.warn("Error while closing the lock client", e.getCause()); // closeLater() never errors
        }
    }

    /**
     * Closes in order, each step bounded, so that close is prompt whatever the lock service does: no new
     * acquire or wait; every held lease lost ({@code CLIENT_CLOSED}) and released; the store commands still in
     * flight (renewals, releases, undos, acquires whose grants are released again) given up to the command timeout
     * to finish, and the tails being written ({@link HeldLease#releaseNoSoonerThan}: the renewal in flight they wait
     * for, then their own command) up to two command timeouts, and the undos of acquires that may still take
     * effect up to the store's late-grant window more (an acquire failing within the command timeout, and its
     * window after that); the connections closed; the
     * scheduler, if the client owns it, disposed.
     */
    private Mono<Void> doClose() {
        closed.set(true);
        serverChanges.dispose();
        waiters.close();
        List<HeldLease> unsettled = registry.snapshot();
        Duration bound = runtime.commandTimeout().plus(runtime.store().lateGrantWindow()).plus(Duration.ofMillis(100));
        ClientSettings settings = runtime.settings();
        // A tail being written is two commands in a row (the renewal in flight it waits for, then its own), and the
        // lock must stay taken for the whole tail: it gets two command timeouts.
        Duration tailBound = runtime.commandTimeout().multipliedBy(2).plus(Duration.ofMillis(100));
        Mono<Void> tails = Flux.fromIterable(unsettled)
                .flatMap(HeldLease::releaseEnded)
                .then()
                .timeout(tailBound, Schedulers.parallel())
                .onErrorResume(e -> {
                    log.warn("Lock tails still being written after {} ms on close; closing anyway: {}", tailBound.toMillis(),
                            e.toString());
                    return Mono.empty();
                });
        return Flux.fromIterable(unsettled)
                .flatMap(HeldLease::closeAndRelease)
                // Undos waiting out a back-off run now, while the store still takes commands, and go on until the
                // acquires they undo can no longer take effect.
                .mergeWith(undos.flush())
                .then(runtime.inFlight().idle())
                .timeout(bound, Schedulers.parallel())
                .onErrorResume(e -> {
                    log.warn("Lock commands still in flight after {} ms on close; closing anyway: {}", bound.toMillis(), e.toString());
                    return Mono.empty();
                })
                .and(tails)
                .then(Mono.fromRunnable(() -> registry.snapshot().forEach(HeldLease::settleOnClose)))
                .then(Mono.fromRunnable(renewer::stop))
                // Bounded apart. close() waits CLOSE_WAIT for all this; past it, closing goes on in the background.
                // Deferred: the store refuses statements once closed, and the releases above must run first.
                .then(Mono.defer(() -> runtime.store().close()).timeout(STORE_CLOSE_WAIT, Schedulers.parallel()).onErrorResume(e -> {
                    log.warn("Closing the lock service connections did not finish within {} ms: {}", STORE_CLOSE_WAIT.toMillis(),
                            e.toString());
                    return Mono.empty();
                }))
                .then(Mono.fromRunnable(() -> {
                    if (settings.ownsScheduler()) {
                        settings.scheduler().dispose();
                    }
                }))
                .onErrorResume(e -> {
                    log.warn("Error while closing the lock client", e);
                    return Mono.empty();
                })
                .then();
    }

    /**
     * The leases this client holds now, for the test kit and diagnostics.
     *
     * @return the held leases
     */
    public List<FencedLease> heldLeaseList() {
        return renewer.held().stream().map(HeldLease::publicView).toList();
    }

    /** What this client's lifecycle shares, for tests. */
    LeaseRuntime runtime() {
        return runtime;
    }

    /**
     * The monotonic clock of this client's deadlines.
     *
     * @return nanoseconds
     */
    long now() {
        return runtime.now();
    }

    /**
     * Loses the lease this client holds on {@code name}, as if {@code reason} had happened (for the test
     * kit). Its loss is signalled on the calling thread.
     *
     * @param name the lock name
     * @param reason the reason to report
     * @return whether a held lease was found and lost
     */
    public boolean forceLoss(String name, LossReason reason) {
        HeldLease lease = registry.held(name);
        return lease != null && lease.loseOnCallingThread(reason);
    }

    /**
     * Stops renewing the lease this client holds on {@code name}, as a long pause would (for the test kit):
     * the lease is lost when its deadline passes, and its key expires in the store.
     *
     * @param name the lock name
     * @return whether a held lease was found
     */
    public boolean freeze(String name) {
        HeldLease lease = registry.held(name);
        if (lease != null) {
            lease.freeze();
        }
        return lease != null;
    }
}
