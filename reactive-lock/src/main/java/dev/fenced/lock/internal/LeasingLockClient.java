package dev.fenced.lock.internal;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
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
import java.util.concurrent.TimeUnit;
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
    private static final Duration UNDO_FIRST_BACKOFF = Duration.ofMillis(20);
    private static final Duration UNDO_MAX_BACKOFF = Duration.ofSeconds(1);

    private final LeaseStore store;
    private final ClientSettings settings;
    private final Scheduler scheduler;
    private final Renewer renewer;
    private final boolean virtualTime;
    private final OwnerIds ownerIds = new OwnerIds();
    private final KeyLayout keys;
    private final Map<String, Long> floors = new ConcurrentHashMap<>();
    private final Map<String, WaitQueue> waitQueues = new ConcurrentHashMap<>();
    private final AtomicBoolean closed = new AtomicBoolean();
    private final Set<AcquireWaiter> waiters = ConcurrentHashMap.newKeySet();
    private final Mono<Void> closeResult;
    private final Disposable serverChanges;

    private LeasingLockClient(LeaseStore store, ClientSettings settings) {
        this.store = store;
        this.settings = settings;
        this.keys = new KeyLayout(settings.keyPrefix());
        this.scheduler = settings.scheduler();
        this.renewer = new Renewer(this, scheduler);
        this.virtualTime = scheduler.getClass().getName().equals("reactor.test.scheduler.VirtualTimeScheduler");
        this.closeResult = Mono.defer(this::doClose).cache();
        settings.observer().heldLeases(renewer::count);
        this.serverChanges = store.serverChanges().subscribe(change -> loseAll(LossReason.SERVER_CHANGED));
    }

    /** Every held lease is lost at once: the server that held them changed. */
    private void loseAll(LossReason reason) {
        for (HeldLease lease : renewer.held()) {
            lease.markLost(reason);
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
        Duration leaseTime = options.leaseTime() != null ? options.leaseTime() : settings.leaseTime();
        Duration maxWait = options.maxWait() != null ? options.maxWait() : settings.maxWait();
        String leaseProblem = settings.problemWithLeaseTime(leaseTime);
        if (!leaseProblem.isEmpty()) {
            return Mono.error(new IllegalArgumentException(leaseProblem));
        }
        long leaseNanos = leaseTime.toNanos();
        return Mono.deferContextual(ctx -> {
            if (closed.get()) {
                return Mono.error(LockClientClosedException.of(name));
            }
            FencedLease enclosing = LeaseContext.find(ctx, name);
            if (enclosing != null && ownedByThisClient(enclosing)) {
                return reuse(enclosing);
            }
            Mono<FencedLease> acquire = maxWait.isZero()
                    ? attempt(name, leaseNanos).mapNotNull(AttemptResult::lease)
                    : AcquireWaiter.waitFor(this, name, leaseNanos, maxWait).cast(FencedLease.class);
            return observed(name, acquire);
        }).doOnDiscard(HeldLease.class, lease -> lease.releaseQuietly().subscribe())
                .contextWrite(DroppedLeases::releaseIn);
    }

    private Mono<FencedLease> observed(String name, Mono<FencedLease> acquire) {
        LockObserver observer = settings.observer();
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
        return root instanceof HeldLease held && held.client() == this;
    }

    private static Mono<FencedLease> reuse(FencedLease enclosing) {
        if (enclosing.isHeld()) {
            return Mono.just(new NestedLease(enclosing));
        }
        FencedLease root = enclosing instanceof NestedLease nested ? nested.outer() : enclosing;
        LeaseLostException loss = root instanceof HeldLease held ? held.loss() : null;
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
        return lease instanceof HeldLease held ? held.releaseQuietly() : lease.release().then();
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

    /**
     * One cancel-safe attempt. Lettuce cannot recall a command already on the wire, so a cancelled
     * attempt is undone when its reply (or failure) arrives: an owner-checked release of what it took.
     */
    Mono<AttemptResult> attempt(String name, long leaseNanos) {
        return Mono.<AttemptResult>create(sink -> {
            String owner = ownerIds.next();
            long floor = floors.getOrDefault(name, 0L);
            long leaseMillis = TimeUnit.NANOSECONDS.toMillis(leaseNanos);
            AtomicInteger state = new AtomicInteger(PENDING);
            sink.onCancel(() -> state.compareAndSet(PENDING, CANCELLED));
            long sentAt = now(); // deadlines count from before the command is sent
            store.acquire(name, owner, leaseMillis, floor).subscribe(
                    reply -> {
                        if (!reply.acquired()) {
                            if (state.compareAndSet(PENDING, DONE)) {
                                sink.success(new AttemptResult(null, reply.holderTtlMillis()));
                            }
                            return;
                        }
                        if (!state.compareAndSet(PENDING, DONE)) {
                            undo(name, owner, reply.token(), leaseMillis);
                            return;
                        }
                        if (floor > 0) {
                            floors.remove(name, floor);
                        }
                        long renewEvery = settings.renewEveryNanos(leaseNanos);
                        HeldLease lease = new HeldLease(this, name, owner, reply.token(), leaseNanos, renewEvery,
                                sentAt + leaseNanos - ClientSettings.driftNanos(leaseNanos), sentAt + renewEvery);
                        renewer.track(lease);
                        sink.success(new AttemptResult(lease, 0));
                    },
                    error -> {
                        // The script may have run before the failure (a timeout, a reset): undo by owner.
                        undo(name, owner, null, leaseMillis);
                        if (state.compareAndSet(PENDING, DONE)) {
                            sink.error(error);
                        }
                    });
        }).doOnDiscard(AttemptResult.class, result -> {
            HeldLease lease = result.lease();
            if (lease != null) {
                lease.releaseQuietly().subscribe();
            }
        });
    }

    /**
     * Releases what an abandoned attempt may hold. While the lock service cannot be reached (the reset that
     * lost the acquire's reply usually closed the connection too) the release is retried, with back-off, for
     * as long as the lease could still hold the lock: otherwise one lost reply would block the name for a
     * whole lease time. The release is owner-checked, so a late retry cannot free someone else's lease.
     */
    private void undo(String name, String owner, @Nullable Long token, long leaseMillis) {
        Duration lease = Duration.ofMillis(leaseMillis);
        store.release(name, owner, token)
                .retryWhen(Retry.backoff(Long.MAX_VALUE, UNDO_FIRST_BACKOFF)
                        .maxBackoff(lease.dividedBy(4).compareTo(UNDO_MAX_BACKOFF) < 0 ? lease.dividedBy(4) : UNDO_MAX_BACKOFF)
                        .filter(e -> e instanceof LockServiceException && !closed.get())
                        .scheduler(scheduler))
                .timeout(lease, scheduler)
                .subscribe(
                        deleted -> log.debug("Undid abandoned acquire of lock '{}' by {}: {}", name, owner,
                                deleted ? "released" : "nothing held"),
                        error -> log.debug("Could not undo abandoned acquire of lock '{}' by {}; it expires with its lease: {}",
                                name, owner, error.toString()));
    }

    /**
     * The identity of a lock of this client: its key, which carries the key prefix.
     *
     * @param name the lock name
     * @return the lock id
     */
    String lockId(String name) {
        return keys.lockKey(name);
    }

    /**
     * Makes the next acquire of {@code name} take a token above {@code floor}: used when storage has seen
     * a token that the lock service no longer knows of.
     *
     * @param name the lock name
     * @param floor the token to exceed
     */
    public void raiseFloor(String name, long floor) {
        if (floor > MAX_TOKEN) {
            // Lua numbers are doubles: beyond 2^53 the script could not mint exact tokens.
            log.warn("Ignoring token floor {} for lock '{}': tokens above 2^53 are not supported", floor, name);
            return;
        }
        floors.merge(name, floor, Math::max);
    }

    /** The largest token the scripts handle exactly (Lua numbers are doubles). */
    static final long MAX_TOKEN = 1L << 53;

    @Override
    public Mono<Duration> ping() {
        return Mono.defer(() -> {
            if (closed.get()) {
                return Mono.error(LockClientClosedException.of(""));
            }
            long start = System.nanoTime();
            return store.ping().then(Mono.fromCallable(() -> Duration.ofNanos(System.nanoTime() - start)));
        });
    }

    @Override
    public int heldLeases() {
        return renewer.count();
    }

    @Override
    public Mono<Void> closeLater() {
        return closeResult;
    }

    @Override
    public void close() {
        if (Schedulers.isInNonBlockingThread() || store.onIoThread()) {
            throw new IllegalStateException("close() blocks; on a non-blocking thread (" + Thread.currentThread().getName()
                    + ") subscribe to closeLater() instead");
        }
        closeLater().block(CLOSE_WAIT);
    }

    private Mono<Void> doClose() {
        closed.set(true);
        serverChanges.dispose();
        for (AcquireWaiter waiter : List.copyOf(waiters)) {
            waiter.fail(LockClientClosedException.of(waiter.name()));
        }
        List<HeldLease> held = renewer.held();
        return Flux.fromIterable(held)
                .flatMap(HeldLease::closeAndRelease)
                .then(Mono.fromRunnable(renewer::stop))
                .then(store.close())
                // Gracefully: the completion may run on an event loop, where a blocking dispose is not allowed.
                .then(settings.ownsScheduler() ? scheduler.disposeGracefully() : Mono.empty())
                .onErrorResume(e -> {
                    log.warn("Error while closing the lock client", e);
                    return Mono.empty();
                })
                .then();
    }

    /**
     * The monotonic clock of deadlines: {@link System#nanoTime()}, except on a virtual-time scheduler, whose
     * virtual time is the clock. (A real Reactor scheduler's {@code now()} is wall-clock time in
     * milliseconds, which can jump.)
     */
    long now() {
        return virtualTime ? scheduler.now(TimeUnit.NANOSECONDS) : System.nanoTime();
    }

    Duration commandTimeout() {
        return settings.commandTimeout();
    }

    Scheduler scheduler() {
        return scheduler;
    }

    LeaseStore store() {
        return store;
    }

    LockObserver observer() {
        return settings.observer();
    }

    /** Registers a waiter so that close can end it; false once the client is closed. */
    boolean register(AcquireWaiter waiter) {
        waiters.add(waiter);
        if (closed.get()) {
            waiters.remove(waiter);
            return false;
        }
        return true;
    }

    void unregister(AcquireWaiter waiter) {
        waiters.remove(waiter);
    }

    boolean hasWaiters(String name) {
        WaitQueue queue = waitQueues.get(name);
        return queue != null && queue.hasWaiters();
    }

    WaitQueue waitQueue(String name) {
        return waitQueues.computeIfAbsent(name, n -> new WaitQueue(store, n, waitQueues));
    }

    Renewer renewer() {
        return renewer;
    }

    /**
     * The leases this client holds now, for the test kit and diagnostics.
     *
     * @return the held leases
     */
    public List<FencedLease> heldLeaseList() {
        return List.copyOf(renewer.held());
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
        HeldLease lease = heldLease(name);
        return lease != null && lease.markLost(reason);
    }

    /**
     * Stops renewing the lease this client holds on {@code name}, as a long pause would (for the test kit):
     * the lease is lost when its deadline passes, and its key expires in the store.
     *
     * @param name the lock name
     * @return whether a held lease was found
     */
    public boolean freeze(String name) {
        HeldLease lease = heldLease(name);
        if (lease != null) {
            lease.freeze();
        }
        return lease != null;
    }

    private @Nullable HeldLease heldLease(String name) {
        for (HeldLease lease : renewer.held()) {
            if (lease.name().equals(name) && lease.isActive()) {
                return lease;
            }
        }
        return null;
    }

    private static final int PENDING = 0;
    private static final int DONE = 1;
    private static final int CANCELLED = 2;

    /**
     * The result of one attempt: a lease, or the holder's remaining time.
     *
     * @param lease the lease, or {@code null} when the lock is held by someone else
     * @param holderTtlMillis the holder's remaining time (negative if unknown)
     */
    record AttemptResult(@Nullable HeldLease lease, long holderTtlMillis) {
    }
}
