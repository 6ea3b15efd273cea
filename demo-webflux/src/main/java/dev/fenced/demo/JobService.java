package dev.fenced.demo;

import dev.fenced.lock.FencedJob;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.JobOutcome;
import dev.fenced.lock.StaleFencingTokenException;
import dev.fenced.spring.FencedLockAutoConfiguration;
import dev.fenced.spring.FencedProperties;
import io.lettuce.core.RedisURI;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.context.event.ApplicationReadyEvent;
import org.springframework.context.event.EventListener;
import org.springframework.core.env.Environment;
import org.springframework.stereotype.Service;
import reactor.core.Disposable;
import reactor.core.Disposables;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * A scheduled job ("nightly report", every few seconds in the demo) on two instances of the service, each a lock
 * client of its own ({@link JobInstance}) against the demo's Redis and PostgreSQL. Each tick fires on both
 * instances; {@link FencedLockClient#runJob} runs it on the one that gets the lock and skips it on the other. The
 * job writes one row with a fenced upsert carrying its token ({@link JobReports}).
 *
 * <p>{@link #stallNextTick(boolean)} pauses the instance that runs the next tick right after it took the lock, before its
 * write reaches PostgreSQL (its connections stop moving, as in the scenario). Its lock is cut off at lockAtMostFor
 * ({@code CUT_OFF}: the job is cancelled, but its write is already on the wire, out of the client's reach); the
 * other instance runs the next tick with a higher token and writes; then the paused instance resumes, and its late
 * write is refused by PostgreSQL ({@link StaleFencingTokenException}).
 *
 * <p>The live schedule ({@code fenced.demo.job.period}, default 3 s; {@code fenced.demo.job.enabled=false} turns it
 * off) runs from the application's start; {@link #replay()} plays the same story as a script of three ticks on a
 * fresh pair of instances and job name, for tests and the API.
 */
@Service
class JobService implements DisposableBean {

    static final String LIVE_JOB = "report:nightly";
    static final Duration LOCK_AT_MOST_FOR = Duration.ofSeconds(2);
    static final Duration LOCK_AT_LEAST_FOR = Duration.ofSeconds(1);
    static final String INSTANCE_1 = "instance-1";
    static final String INSTANCE_2 = "instance-2";

    private static final Logger LOG = LoggerFactory.getLogger(JobService.class);
    private static final int LIVE_EVENTS_KEPT = 60;
    private static final Duration POLL = Duration.ofMillis(50);
    private static final Duration WAIT_BOUND = Duration.ofSeconds(15);
    private static final AtomicLong REPLAYS = new AtomicLong();

    private final JobReports reports;
    private final Environment environment;
    private final RedisURI redis;
    private final String keyPrefix;
    private final Duration period;
    private final boolean enabled;
    private final EventLoopGroup relayLoop = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
    private final Run live = new Run(job(LIVE_JOB), LIVE_EVENTS_KEPT, true);
    private volatile List<JobInstance> liveInstances = List.of();
    private final Disposable.Swap schedule = Disposables.swap();

    JobService(JobReports reports, FencedProperties properties, Environment environment,
            @Value("${fenced.demo.job.period:3s}") Duration period,
            @Value("${fenced.demo.job.enabled:true}") boolean enabled) {
        if (period.compareTo(LOCK_AT_MOST_FOR) <= 0) {
            throw new IllegalArgumentException("fenced.demo.job.period (" + period + ") must be longer than the job's "
                    + "lockAtMostFor (" + LOCK_AT_MOST_FOR + ")");
        }
        this.reports = reports;
        this.environment = environment;
        this.redis = RedisURI.create(FencedLockAutoConfiguration.redisUri(properties, environment));
        this.keyPrefix = properties.keyPrefix();
        this.period = period;
        this.enabled = enabled;
    }

    private static FencedJob job(String name) {
        return FencedJob.of(name, LOCK_AT_MOST_FOR).withLockAtLeastFor(LOCK_AT_LEAST_FOR);
    }

    /** Starts the live schedule once the application is ready (after the schema exists). */
    @EventListener(ApplicationReadyEvent.class)
    void start() {
        if (!enabled) {
            return;
        }
        schedule.update(openInstances("job instance").subscribe(instances -> {
            liveInstances = instances;
            schedule.update(Flux.interval(period, period)
                    .onBackpressureDrop()
                    .flatMap(n -> tickAll(instances, (int) (n + 1)))
                    .subscribe());
            LOG.info("Scheduled job '{}' runs every {} on {} and {}", LIVE_JOB, period, INSTANCE_1, INSTANCE_2);
        }, e -> LOG.warn("The scheduled job's instances could not be opened: {}", e.toString())));
    }

    /** The live schedule's recent events, then each new one as it happens. */
    Flux<JobEvent> liveEvents() {
        return live.events.asFlux();
    }

    /** The live schedule's recent events numbered above {@code seq}, for clients that poll. */
    List<JobEvent> liveEventsAfter(long seq) {
        return live.after(seq);
    }

    /**
     * Pauses the instance that runs the live job's next tick. Emits at once, or with {@code wait} once the paused
     * instance's write was answered (refused, normally) with the events from the pause on; empty if a pause is
     * already waiting or running.
     */
    Mono<JobStall> stallNextTick(boolean wait) {
        if (liveInstances.stream().anyMatch(JobInstance::paused)) {
            return Mono.empty();
        }
        long from = live.lastSeq();
        Sinks.One<Long> write = live.arm();
        if (write == null) {
            return Mono.empty();
        }
        if (!wait) {
            return Mono.just(new JobStall(true, from, List.of()));
        }
        return write.asMono().onErrorResume(e -> Mono.just(0L))
                .timeout(period.multipliedBy(10))
                .then(Mono.fromSupplier(() -> new JobStall(true, from, live.after(from))));
    }

    private Mono<Void> tickAll(List<JobInstance> instances, int tick) {
        return Flux.fromIterable(instances)
                .filter(instance -> !instance.paused()) // a paused process fires no timers
                .flatMap(instance -> tick(live, instance, tick))
                .then();
    }

    /**
     * The scripted replay: tick 1 runs on instance 1 (instance 2 fires while it holds the lock and skips); at tick 2
     * instance 1 is paused with its write on the wire, and cut off at lockAtMostFor (instance 2 skips again, the lock
     * being held); tick 3 runs on instance 2, whose write is accepted; then instance 1 resumes and PostgreSQL refuses
     * its late write.
     */
    Mono<JobReplayReport> replay() {
        String name = "report:replay-" + Long.toString(System.currentTimeMillis(), 36) + "-" + REPLAYS.incrementAndGet();
        Run run = new Run(job(name), Integer.MAX_VALUE, false);
        return Mono.usingWhen(openInstances("job instance (replay " + name.substring(name.indexOf('-') + 1) + ")"),
                instances -> script(run, instances.get(0), instances.get(1)),
                JobService::closeAll, (instances, e) -> closeAll(instances), JobService::closeAll);
    }

    private Mono<JobReplayReport> script(Run run, JobInstance one, JobInstance two) {
        String name = run.job.name();
        Mono<JobOutcome[]> tick1 = firstThenSecond(run, one, two, 1);
        Mono<JobOutcome[]> tick2 = Mono.defer(() -> {
            run.arm();
            return firstThenSecond(run, one, two, 2);
        });
        Mono<JobOutcome> tick3 = Mono.defer(() -> {
            run.add(3, one, "not-fired", null, "info", one.label() + " is paused: it fires no tick");
            return tick(run, two, 3);
        });
        return tick1
                .flatMap(first -> until(two.locks(), name, false).then(tick2))
                .flatMap(second -> until(two.locks(), name, false).then(tick3).map(third -> new JobOutcome[] {
                        second[0], third}))
                .flatMap(outcomes -> {
                    resume(run, one, "instance 2 has written tick 3");
                    return run.stalledWrite().asMono().onErrorResume(e -> Mono.just(0L))
                            .timeout(WAIT_BOUND)
                            .then(reports.find(name))
                            .map(row -> {
                                JobEvent refused = run.find(one.id(), "write-refused");
                                return new JobReplayReport(name, LOCK_AT_MOST_FOR.toMillis(),
                                        LOCK_AT_LEAST_FOR.toMillis(), outcomes[0].token(), outcomes[1].token(),
                                        refused != null, refused == null ? null : refused.detail(), row, run.all());
                            });
                });
    }

    /** Fires {@code first}'s tick, then {@code second}'s once the lock is seen held (by {@code first}). */
    private Mono<JobOutcome[]> firstThenSecond(Run run, JobInstance first, JobInstance second, int tick) {
        Mono<JobOutcome> one = tick(run, first, tick);
        Mono<JobOutcome> two = until(second.locks(), run.job.name(), true).then(Mono.defer(() -> tick(run, second, tick)));
        return Mono.zip(one, two).map(t -> new JobOutcome[] {t.getT1(), t.getT2()});
    }

    /** Completes once the fleet view of {@code locks} shows {@code name} held ({@code held}) or free. */
    private static Mono<Void> until(FencedLockClient locks, String name, boolean held) {
        return Mono.defer(() -> locks.lock(name).hasElement())
                .filter(isHeld -> isHeld == held)
                .repeatWhenEmpty(attempts -> attempts.delayElements(POLL))
                .timeout(WAIT_BOUND)
                .then();
    }

    private Mono<JobOutcome> tick(Run run, JobInstance instance, int tick) {
        return instance.locks().runJob(run.job, () -> work(run, instance, tick))
                .doOnNext(outcome -> run.add(tick, instance, kind(outcome), outcome.token() == 0 ? null : outcome.token(),
                        css(outcome), describe(instance, outcome)));
    }

    /**
     * The job: writes the report row under the tick's lease. The write runs on its own subscription, so that when
     * the job is cancelled (cut off at lockAtMostFor) a write already on the wire still gets its answer: cancelling
     * cannot recall bytes that were sent, and the demo shows what PostgreSQL does with them.
     */
    private Mono<Long> work(Run run, JobInstance instance, int tick) {
        String name = run.job.name();
        return FencedLease.current(name)
                .switchIfEmpty(Mono.error(() -> new IllegalStateException("No lease on " + name + " in the job")))
                .flatMap(lease -> {
                    run.add(tick, instance, "started", lease.token(), "ok", instance.label() + " got the lock with "
                            + "fencing token " + lease.token() + " and runs tick " + tick);
                    Sinks.One<Long> stalledWrite = run.takeStall();
                    boolean stall = stalledWrite != null;
                    Sinks.One<Long> written = stall ? stalledWrite : Sinks.<Long>one();
                    Mono.usingWhen(instance.services().database().create(), connection -> {
                                if (stall) {
                                    pause(run, instance, tick);
                                }
                                return JobReports.write(connection, name, tick, instance.id(), lease);
                            }, Connection::close)
                            .subscribe(rows -> {
                                run.add(tick, instance, "write-accepted", lease.token(), "ok", "PostgreSQL accepts the "
                                        + "report of tick " + tick + " by " + instance.id() + " (token " + lease.token()
                                        + ")");
                                if (run.resumeAfterNextWrite) {
                                    liveInstances.stream().filter(other -> other != instance && other.paused()
                                            && other.pausedAtTick() < tick).forEach(other -> resume(run, other,
                                            instance.id() + " has written tick " + tick));
                                }
                                written.tryEmitValue(rows);
                            }, error -> {
                                if (error instanceof StaleFencingTokenException stale) {
                                    run.add(tick, instance, "write-refused", stale.presentedToken(), "rejected",
                                            "PostgreSQL refuses the late write of " + instance.id() + " (tick " + tick
                                            + "): token " + stale.presentedToken() + " is older than the stored token "
                                            + stale.storedToken() + " (" + stale.getMessage() + ")");
                                } else {
                                    run.add(tick, instance, "write-failed", lease.token(), "rejected",
                                            "the report write of " + instance.id() + " failed: " + error);
                                }
                                written.tryEmitError(error);
                            });
                    return written.asMono();
                });
    }

    private void pause(Run run, JobInstance instance, int tick) {
        if (!instance.pause(tick)) {
            return;
        }
        run.add(tick, instance, "paused", null, "lost", instance.label() + " is paused right after taking the lock: its "
                + "connections to Redis and PostgreSQL stop moving, and its report write waits on the wire");
        if (run.resumeAfterNextWrite) {
            // Should the other instance not run, the pause still ends.
            Mono.delay(period.multipliedBy(4)).subscribe(x -> {
                if (instance.resumePauseOf(tick)) {
                    run.add(tick, instance, "resumed", null, "info", instance.label() + " resumes (the pause ran out)");
                }
            });
        }
    }

    private static void resume(Run run, JobInstance instance, String why) {
        int tick = instance.pausedAtTick();
        if (instance.resume()) {
            run.add(tick, instance, "resumed", null, "info", instance.label() + " resumes (" + why + "): its connections "
                    + "move again, and the write it sent at tick " + tick + " reaches PostgreSQL");
        }
    }

    private static String kind(JobOutcome outcome) {
        return outcome.status().name().toLowerCase(Locale.ROOT).replace('_', '-');
    }

    private static String css(JobOutcome outcome) {
        return switch (outcome.status()) {
            case RAN -> "ok";
            case SKIPPED -> "info";
            case LOST, CUT_OFF -> "lost";
            case FAILED, UNAVAILABLE -> "rejected";
        };
    }

    private static String describe(JobInstance instance, JobOutcome outcome) {
        return switch (outcome.status()) {
            case RAN -> instance.id() + " ran the tick with token " + outcome.token() + " in "
                    + outcome.duration().toMillis() + " ms";
            case SKIPPED -> instance.id() + " skipped the tick: " + outcome.reason();
            case CUT_OFF -> instance.id() + "'s lock reached lockAtMostFor (" + LOCK_AT_MOST_FOR.toMillis()
                    + " ms): its client cancelled the job and gave the lock up; its write was already on the wire";
            default -> instance.id() + ": " + outcome.status() + ", " + outcome.reason();
        };
    }

    private Mono<List<JobInstance>> openInstances(String labelPrefix) {
        return JobInstance.open(1, labelPrefix + " 1", relayLoop, redis, environment, keyPrefix)
                .flatMap(one -> JobInstance.open(2, labelPrefix + " 2", relayLoop, redis, environment, keyPrefix)
                        .map(two -> List.of(one, two))
                        .onErrorResume(e -> one.close().then(Mono.error(e))));
    }

    private static Mono<Void> closeAll(List<JobInstance> instances) {
        return Flux.fromIterable(instances).concatMap(JobInstance::close).then();
    }

    @Override
    public void destroy() {
        schedule.dispose();
        closeAll(liveInstances).block(Duration.ofSeconds(15));
        relayLoop.shutdownGracefully(0, 2, TimeUnit.SECONDS);
    }

    /** One run of the job (the live schedule, or a replay): its spec, its events, a pause waiting to happen. */
    private static final class Run {

        final FencedJob job;
        final boolean resumeAfterNextWrite;
        final Sinks.Many<JobEvent> events;
        // The answer to the paused instance's write; set when a pause is armed.
        private Sinks.One<Long> stalledWrite = Sinks.one();
        private boolean stallNext;
        private final int kept;
        private final ArrayDeque<JobEvent> recent = new ArrayDeque<>();
        private long seq;

        Run(FencedJob job, int kept, boolean resumeAfterNextWrite) {
            this.job = job;
            this.kept = kept;
            this.resumeAfterNextWrite = resumeAfterNextWrite;
            this.events = Sinks.many().replay().limit(Math.min(kept, LIVE_EVENTS_KEPT));
        }

        // Emitting under the monitor keeps the sink's signals serialized, from any thread.
        synchronized void add(int tick, JobInstance instance, String kind, @Nullable Long token, String outcome,
                String detail) {
            JobEvent event = new JobEvent(++seq, job.name(), tick, instance.id(), kind, token, outcome, detail);
            recent.addLast(event);
            if (recent.size() > kept) {
                recent.removeFirst();
            }
            events.tryEmitNext(event);
        }

        /** Arms a pause for the next tick's runner; the sink answers its write. Null if one is armed already. */
        synchronized Sinks.@Nullable One<Long> arm() {
            if (stallNext) {
                return null;
            }
            stallNext = true;
            stalledWrite = Sinks.one();
            return stalledWrite;
        }

        /** Takes the armed pause, if any: the sink its write answers. */
        synchronized Sinks.@Nullable One<Long> takeStall() {
            if (!stallNext) {
                return null;
            }
            stallNext = false;
            return stalledWrite;
        }

        synchronized Sinks.One<Long> stalledWrite() {
            return stalledWrite;
        }

        synchronized long lastSeq() {
            return seq;
        }

        synchronized List<JobEvent> after(long seq) {
            return recent.stream().filter(e -> e.seq() > seq).toList();
        }

        synchronized List<JobEvent> all() {
            return List.copyOf(new ArrayList<>(recent));
        }

        synchronized @Nullable JobEvent find(String instance, String kind) {
            return recent.stream().filter(e -> e.instance().equals(instance) && e.kind().equals(kind)).findFirst()
                    .orElse(null);
        }
    }
}
