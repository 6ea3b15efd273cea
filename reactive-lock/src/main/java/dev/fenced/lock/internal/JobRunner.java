package dev.fenced.lock.internal;

import dev.fenced.lock.FencedJob;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.JobOutcome;
import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.LockAcquireTimeoutException;
import dev.fenced.lock.LockObserver;
import dev.fenced.lock.LockWaitQueueFullException;
import dev.fenced.lock.ReleaseOutcome;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongSupplier;
import java.util.function.Predicate;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * Runs ticks of {@link FencedJob}s on one client ({@link FencedLockClient#runJob}): takes the lock without nesting,
 * runs the job with the lease in its Context, cancels it on loss, releases (or leaves a lockAtLeastFor tail), and
 * turns every way a tick can end into a {@link JobOutcome}, logged and observed. Thread-safe.
 */
public final class JobRunner {

    private static final Logger log = Loggers.getLogger(JobRunner.class);

    private final FencedLockClient client;
    private final LockObserver observer;
    private final LongSupplier clock;
    private final Predicate<FencedLease> nests;
    /** The running tick of each job name, by identity: a tick frees only its own place. */
    private final @Nullable Map<String, Object> running;

    /**
     * @param client the client whose locks the jobs take
     * @param observer told of every tick
     * @param clock the monotonic clock of durations, in ns
     * @param nests whether an acquire of the client would reuse this lease of an enclosing scope
     * @param trackRunning whether to skip a tick while one of the same job runs in this runner
     */
    JobRunner(FencedLockClient client, LockObserver observer, LongSupplier clock, Predicate<FencedLease> nests,
            boolean trackRunning) {
        this.client = client;
        this.observer = observer;
        this.clock = clock;
        this.nests = nests;
        this.running = trackRunning ? new ConcurrentHashMap<>() : null;
    }

    /**
     * A runner over any client's public API: no observer, no check for a running tick (the lock service still
     * refuses an overlapping tick, since no enclosing lease is ever reused).
     *
     * @param client the client
     * @return the runner
     */
    public static JobRunner standalone(FencedLockClient client) {
        return new JobRunner(Objects.requireNonNull(client, "client"), LockObserver.NONE, System::nanoTime, lease -> true,
                false);
    }

    /**
     * One tick of {@code job}; see {@link FencedLockClient#runJob(FencedJob, Supplier)}.
     *
     * @param job the job
     * @param work makes the job's publisher
     * @return the outcome; never an error but for a {@code null} argument
     */
    public Mono<JobOutcome> run(FencedJob job, Supplier<? extends Publisher<?>> work) {
        if (job == null) {
            return Mono.error(new NullPointerException("job must not be null"));
        }
        if (work == null) {
            return Mono.error(new NullPointerException("work must not be null"));
        }
        String name = job.name();
        return Mono.deferContextual(ctx -> {
            LockObserver.JobObservation observation = once(observer.jobStarted(name));
            FencedLease enclosing = LeaseContext.find(ctx, name);
            if (enclosing != null && nests.test(enclosing)) {
                // An acquire would reuse the caller's lease: a job never nests, it is skipped.
                return Mono.just(ended(observation, JobOutcome.skipped(name, "an enclosing scope of the caller holds the lock")));
            }
            Map<String, Object> ticks = running;
            Object self = new Object();
            if (ticks != null && ticks.putIfAbsent(name, self) != null) {
                return Mono.just(ended(observation, JobOutcome.skipped(name, "a tick of this job is still running in this instance")));
            }
            // The place is freed before the outcome is emitted: a tick started by whoever receives it is a new tick.
            Runnable free = ticks == null ? () -> { } : () -> ticks.remove(name, self);
            return client.acquire(name, job.acquireOptions())
                    .flatMap(lease -> execute(job, lease, work))
                    .switchIfEmpty(Mono.fromSupplier(() -> JobOutcome.skipped(name, "the lock is held elsewhere")))
                    .onErrorResume(e -> Mono.just(notRun(job, e)))
                    .map(outcome -> {
                        free.run();
                        return ended(observation, outcome);
                    })
                    .doOnCancel(observation::cancelled)
                    .doFinally(signal -> free.run());
        });
    }

    /** The observation told of the tick's end once: an outcome, or a cancel before it, never both. */
    private static LockObserver.JobObservation once(LockObserver.JobObservation observation) {
        if (observation == LockObserver.JobObservation.NONE) {
            return observation;
        }
        java.util.concurrent.atomic.AtomicBoolean told = new java.util.concurrent.atomic.AtomicBoolean();
        return new LockObserver.JobObservation() {
            @Override
            public void ended(JobOutcome outcome) {
                if (told.compareAndSet(false, true)) {
                    observation.ended(outcome);
                }
            }

            @Override
            public void cancelled() {
                if (told.compareAndSet(false, true)) {
                    observation.cancelled();
                }
            }
        };
    }

    private static JobOutcome notRun(FencedJob job, Throwable error) {
        if (error instanceof LockAcquireTimeoutException || error instanceof LockWaitQueueFullException) {
            return JobOutcome.skipped(job.name(), "the lock is held elsewhere: " + error.getMessage());
        }
        return JobOutcome.unavailable(job.name(), error);
    }

    /** Runs the job under the lease; never errors. */
    private Mono<JobOutcome> execute(FencedJob job, FencedLease lease, Supplier<? extends Publisher<?>> work) {
        String name = job.name();
        long start = clock.getAsLong();
        AtomicReference<@Nullable LeaseLostException> loss = new AtomicReference<>();
        Publisher<?> body;
        try {
            body = Objects.requireNonNull(work.get(), "work returned null");
        } catch (Throwable e) {
            return finish(job, lease).thenReturn(JobOutcome.failed(name, lease.token(), took(start), e));
        }
        // Loss is signalled as a value: takeUntilOther would not cancel the job on an error.
        return Flux.from(body)
                .contextWrite(c -> LeaseContext.with(c, lease))
                .takeUntilOther(lease.lost().doOnNext(loss::set).switchIfEmpty(Mono.never()))
                .then(Mono.defer(() -> {
                    LeaseLostException lost = loss.get();
                    if (lost != null) {
                        return afterLoss(lease).thenReturn(JobOutcome.lost(name, took(start), lost));
                    }
                    return finish(job, lease).thenReturn(JobOutcome.ran(name, lease.token(), took(start)));
                }))
                .onErrorResume(error -> {
                    LeaseLostException lost = loss.get();
                    if (lost == null && error instanceof LeaseLostException own && own.token() == lease.token()
                            && name.equals(own.lockName())) {
                        lost = own; // the job saw the loss first (a nested scope of the same lease failed with it)
                    }
                    if (lost != null) {
                        return afterLoss(lease).thenReturn(JobOutcome.lost(name, took(start), lost));
                    }
                    return finish(job, lease).thenReturn(JobOutcome.failed(name, lease.token(), took(start), error));
                })
                // Cancelled (the schedule stopped): the job did not end, so no lockAtLeastFor tail.
                .doOnCancel(() -> lease.release().subscribe(null,
                        e -> log.warn("Could not release the lock of cancelled job '{}' (token {}); it expires with its "
                                + "lease: {}", name, lease.token(), e.toString())));
    }

    /** After the job ended: released, or left to expire lockAtLeastFor after the grant. */
    private static Mono<ReleaseOutcome> finish(FencedJob job, FencedLease lease) {
        Duration atLeast = job.lockAtLeastFor();
        Mono<ReleaseOutcome> release = atLeast.isZero() ? lease.release() : lease.releaseNoSoonerThan(atLeast);
        return release.onErrorResume(e -> {
            log.warn("Could not release the lock of job '{}' (token {}); it expires with its lease: {}", job.name(),
                    lease.token(), e.toString());
            return Mono.empty();
        });
    }

    /** A lost lease may still hold its key (lost by our clock): free it, quietly. */
    private static Mono<ReleaseOutcome> afterLoss(FencedLease lease) {
        return lease.release().onErrorResume(e -> Mono.empty());
    }

    private Duration took(long start) {
        return Duration.ofNanos(Math.max(0, clock.getAsLong() - start));
    }

    private static JobOutcome ended(LockObserver.JobObservation observation, JobOutcome outcome) {
        switch (outcome.status()) {
            case RAN -> log.debug("Job '{}' ran with token {} in {}", outcome.job(), outcome.token(), outcome.duration());
            case SKIPPED -> log.debug("Job '{}' skipped: {}", outcome.job(), outcome.reason());
            case FAILED -> log.warn("Job '{}' (token {}) failed after {}", outcome.job(), outcome.token(), outcome.duration(),
                    outcome.error().orElse(null));
            case LOST -> log.warn("Job '{}' was cancelled after {}: {}", outcome.job(), outcome.duration(), outcome.reason());
            case CUT_OFF -> log.warn("Job '{}' ran for its lockAtMostFor and was cancelled after {}: {}", outcome.job(),
                    outcome.duration(), outcome.reason());
            case UNAVAILABLE -> {
                if (outcome.error().orElse(null) instanceof dev.fenced.lock.LockClientClosedException) {
                    log.debug("Job '{}' skipped this tick: {}", outcome.job(), outcome.reason()); // shutting down
                } else {
                    log.warn("Job '{}' skipped this tick: {}", outcome.job(), outcome.reason());
                }
            }
        }
        observation.ended(outcome);
        return outcome;
    }
}
