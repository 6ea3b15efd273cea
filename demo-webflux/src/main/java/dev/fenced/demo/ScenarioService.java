package dev.fenced.demo;

import dev.fenced.spring.FencedLockAutoConfiguration;
import dev.fenced.spring.FencedProperties;

import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.ForceReleaseResult;
import dev.fenced.lock.LeaseNotHeldException;
import dev.fenced.lock.StaleFencingTokenException;
import io.lettuce.core.RedisURI;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.core.env.Environment;
import org.springframework.stereotype.Service;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Replays the failure Fenced exists for, live, against the real Redis and PostgreSQL, twice: once as the seed did it
 * ({@link PlainTtlArm}: a plain TTL lock and an unguarded write) and once with Fenced ({@link FencedArm}).
 *
 * <p>Worker A takes the invoice's lock with a short lease and reads the invoice. Then A is paused: its
 * connections to Redis and to PostgreSQL go through {@link StallableRelay}s, which stop moving bytes. A sends its
 * write while it still believes it holds the lock, so the write passes every local check and then waits on
 * the wire, as a write does when its sender is paused by a garbage collector right after checking its lease.
 * Redis lets A's key expire. Worker B (connected directly) is granted the lock and writes. When A's connections
 * move again, its write reaches PostgreSQL. Without fencing it is accepted and overwrites B's; with fencing it
 * carries the older token and the fenced update rejects it with {@link StaleFencingTokenException}: B's data is
 * kept.
 *
 * <p>{@link #replayWithStuckHolder()} plays the fenced timeline with a worker A that holds a long lease (a hung
 * job): B waits, and the lock is listed as stalled ({@link StalledLocks}) until someone breaks it by hand
 * ({@code POST /locks/force-release}); then B gets a token above A's, writes, and A's late write is rejected.
 */
@Service
class ScenarioService implements DisposableBean {

    static final Duration WORKER_A_LEASE = Duration.ofMillis(2000);
    /** Worker A's lease when it plays a stuck holder: long enough to see it in the locks panel and break it. */
    static final Duration STUCK_WORKER_A_LEASE = Duration.ofSeconds(30);
    /** The holder label of worker A's lock client, shown by the fleet view. */
    static final String WORKER_A_LABEL = "scenario worker A";
    static final String LOCK_SERVICE = "lock-service";
    static final String WORKER_A = "worker-a";
    static final String WORKER_B = "worker-b";
    static final String DATABASE = "database";

    private static final Duration WORKER_A_WAIT = Duration.ofSeconds(5);
    private static final Variant TIMED_OUT = new Variant(WORKER_A_LEASE, Duration.ofSeconds(10), false);
    private static final Variant STUCK = new Variant(STUCK_WORKER_A_LEASE, STUCK_WORKER_A_LEASE.plusSeconds(10), true);
    private static final String HOW_STUCK = "As in the first run, worker A's connections run through in-app TCP relays "
            + "that stop moving bytes after A acquired the lock and read the invoice. Here A's lease is "
            + STUCK_WORKER_A_LEASE.toSeconds() + " s, as a hung job's would be, so worker B waits for the lock. The "
            + "locks panel lists A's lock as stalled; \"break this lock\" force-releases it (FencedLockClient."
            + "forceRelease): the lock is deleted and its token counter kept, so B is granted a token above A's. B "
            + "writes, the relays move again, and A's late write reaches PostgreSQL, which rejects its older token.";
    private static final String HOW = "Worker A's connections to Redis and to PostgreSQL run through in-app TCP relays. "
            + "After A acquired the lock (lease " + WORKER_A_LEASE.toMillis() + " ms) and read the invoice, the relays "
            + "stop moving bytes: A is paused as a whole, like a process stopped by a long GC pause or a network stall. "
            + "A sends its write while it still believes it holds the lock, so the write passes every local check "
            + "and waits on the wire. Renewals of A's lease cannot reach Redis either (a plain TTL lock has none), so "
            + "Redis lets the lease expire and grants the lock to worker B. Once B has written, the relays move again "
            + "and A's write arrives. Nothing is faked: the locks come from Redis, and what is accepted or rejected is "
            + "decided by PostgreSQL.";

    private final InvoiceRepository invoices;
    private final ConnectionFactory database;
    private final Environment environment;
    private final StalledLocks stalledLocks;
    private final RedisURI redis;
    private final FencedArm fenced;
    private final PlainTtlArm unfenced;
    private final EventLoopGroup relayLoop = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
    private final AtomicLong stuckRunIds = new AtomicLong();
    // The last few background runs, for their pages to ask for their reports.
    @SuppressWarnings("serial")
    private final Map<String, StuckRun> stuckRuns = Collections.synchronizedMap(new LinkedHashMap<>() {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, StuckRun> eldest) {
            return size() > 16;
        }
    });

    ScenarioService(FencedLockClient locks, InvoiceRepository invoices, ConnectionFactory database,
            FencedProperties properties, Environment environment, StalledLocks stalledLocks) {
        this.invoices = invoices;
        this.database = database;
        this.environment = environment;
        this.stalledLocks = stalledLocks;
        this.redis = RedisURI.create(FencedLockAutoConfiguration.redisUri(properties, environment));
        this.fenced = new FencedArm(locks, properties.keyPrefix());
        this.unfenced = new PlainTtlArm(redis, properties.keyPrefix(), properties.leaseTime());
    }

    /** The scenario with Fenced: A's late write is rejected, B's data kept. */
    Mono<ScenarioReport> replay() {
        return replay(fenced, TIMED_OUT);
    }

    /** The same timeline with a plain TTL lock and an unguarded write: A's late write overwrites B's. */
    Mono<ScenarioReport> replayWithoutFencing() {
        return replay(unfenced, TIMED_OUT);
    }

    /**
     * The fenced timeline with a stuck worker A (a lease of {@link #STUCK_WORKER_A_LEASE}): completes once A's late
     * write was answered, after someone broke A's lock, or after A's lease ran out if nobody did.
     */
    Mono<ScenarioReport> replayWithStuckHolder() {
        return replay(fenced, STUCK);
    }

    /**
     * Starts {@link #replayWithStuckHolder()} in the background (for pages that cannot wait on a long request while
     * they poll the locks); its report is then found by {@link #stuckRun(String)} under the id returned.
     */
    String startStuckRun() {
        String id = Long.toString(stuckRunIds.incrementAndGet());
        StuckRun run = new StuckRun(replayWithStuckHolder().cache());
        stuckRuns.put(id, run);
        run.report.subscribe(run.finished::set, run.finished::set);
        return id;
    }

    /** The stuck run {@code id}: its report once it ended (its error if it failed); empty for an unknown id. */
    Mono<Mono<ScenarioReport>> stuckRun(String id, boolean wait) {
        StuckRun run = stuckRuns.get(id);
        if (run == null) {
            return Mono.empty();
        }
        return Mono.just(wait || run.finished.get() != null ? run.report : Mono.empty());
    }

    private Mono<ScenarioReport> replay(ScenarioArm arm, Variant variant) {
        return invoices.insertScenarioInvoice().flatMap(id -> Mono.usingWhen(
                openWorkerA(arm, variant),
                workerA -> Mono.usingWhen(Mono.just(arm.workerB()),
                        workerB -> run(arm, variant, id, workerA, workerB),
                        ScenarioArm.Locks::close),
                WorkerA::close,
                (workerA, error) -> workerA.close(),
                WorkerA::close));
    }

    private Mono<ScenarioReport> run(ScenarioArm arm, Variant variant, long id, WorkerA workerA,
            ScenarioArm.Locks workerB) {
        String name = InvoiceService.lockName(id);
        Timeline timeline = new Timeline();
        // A connects to PostgreSQL before it takes the lock, so that connecting does not eat into its lease.
        return Mono.usingWhen(workerA.services.database().create(),
                connection -> Mono.defer(() -> {
                    timeline.add(WORKER_A, "acquire", "asks for the lock", null, "waiting",
                            "asks for " + name + " with a lease of " + variant.leaseA().toMillis() + " ms");
                    return workerA.locks.acquire(name, WORKER_A_WAIT);
                }).flatMap(heldA -> {
                    timeline.add(LOCK_SERVICE, "granted", "grants A", heldA.token(), "ok",
                            "grants " + name + " to worker A " + heldA.grant());
                    heldA.lost().subscribe(lost -> timeline.add(WORKER_A, "lease-lost", "lease lost", heldA.token(),
                            "lost", lost));
                    return paused(arm, variant, id, name, workerA, heldA, connection, workerB, timeline);
                }),
                Connection::close);
    }

    private Mono<ScenarioReport> paused(ScenarioArm arm, Variant variant, long id, String name, WorkerA workerA,
            ScenarioArm.Held heldA, Connection connection, ScenarioArm.Locks workerB, Timeline timeline) {
        AtomicReference<ForceReleaseResult> broken = new AtomicReference<>();
        return read(connection, id).flatMap(seenByA -> {
            timeline.add(WORKER_A, "read", "reads: ledger " + seenByA.ledgerTotal(), heldA.token(), "ok",
                    "reads invoice " + id + ": status " + seenByA.status() + ", ledger " + seenByA.ledgerTotal());
            workerA.services.stall();
            timeline.add(WORKER_A, "paused", "pauses", heldA.token(), "info", "is paused: its connections to Redis and "
                    + "PostgreSQL stop moving (renewals stall too)");
            if (variant.breakable()) {
                stalledLocks.register(name, result -> {
                    if (result.outcome() == ForceReleaseResult.Outcome.RELEASED) {
                        broken.set(result);
                        timeline.add(LOCK_SERVICE, "force-released", "lock broken by hand", result.token(), "lost",
                                "force-releases " + name + " (token " + result.token() + ", holder '"
                                + result.holderLabel() + "'): " + result.reason());
                    }
                });
            }

            Mono<Outcome> writeA = Mono.defer(() -> {
                timeline.add(WORKER_A, "write-sent", "sends its write", heldA.token(), "waiting",
                        "sends its write (ledger " + (seenByA.ledgerTotal() + seenByA.amount())
                        + ", from what it read); "
                        + heldA.beliefBeforeWrite() + ", and the write waits on the wire");
                return arm.write(connection, heldA, seenByA, WORKER_A);
            }).map(rows -> {
                timeline.add(DATABASE, "accepted", "accepts A's write", heldA.token(), "stale",
                        "accepts worker A's late write: it overwrites worker B's");
                timeline.add(WORKER_A, "wrote", "thinks it wrote", heldA.token(), "ok", "believes it wrote");
                return new Outcome(false, null);
            }).onErrorResume(StaleFencingTokenException.class, e -> {
                timeline.add(DATABASE, "rejected", "rejects A's write", e.presentedToken(), "rejected",
                        "rejects worker A's write: token " + e.presentedToken() + " is older than the stored token "
                        + e.storedToken());
                timeline.add(WORKER_A, "rejected", "told: stale token", e.presentedToken(), "rejected",
                        "gets StaleFencingTokenException: " + e.getMessage());
                return Mono.just(new Outcome(true, e.getMessage()));
            }).onErrorResume(LeaseNotHeldException.class, e -> {
                // Only when this machine was too slow to send the write within A's lease: then A's own check stops it.
                timeline.add(WORKER_A, "refused-locally", "refused locally", heldA.token(), "lost",
                        "its client refused to send the write: the lease had already run out before the pause ("
                        + e.getMessage() + ")");
                return Mono.just(new Outcome(false, e.getMessage()));
            });

            Mono<ScenarioArm.Held> runB = Mono.defer(() -> {
                timeline.add(WORKER_B, "acquire", "asks for the lock", null, "waiting",
                        "asks for " + name + "; it is held by A until A's lease runs out in Redis"
                        + (variant.breakable() ? " or someone breaks A's lock" : ""));
                return workerB.acquire(name, variant.waitB());
            }).flatMap(heldB -> {
                stalledLocks.unregister(name);
                timeline.add(LOCK_SERVICE, "granted", "grants B", heldB.token(), "ok",
                        (broken.get() != null ? "A's lock was broken; " : "A's lease expired unrenewed; ")
                        + "grants " + name + " to worker B " + heldB.grant());
                return Mono.usingWhen(database.create(),
                                connectionB -> read(connectionB, id).flatMap(seenByB -> arm.write(connectionB, heldB,
                                        seenByB, WORKER_B).doOnNext(rows -> {
                                            timeline.add(DATABASE, "accepted", "accepts B's write", heldB.token(), "ok",
                                                    "accepts worker B's write (ledger " + (seenByB.ledgerTotal()
                                                            + seenByB.amount()) + ")");
                                            timeline.add(WORKER_B, "wrote", "writes", heldB.token(), "ok",
                                                    "wrote, having read status " + seenByB.status());
                                        })),
                                Connection::close)
                        .then(heldB.release())
                        .doOnNext(outcome -> timeline.add(WORKER_B, "released", "releases", heldB.token(), "ok",
                                outcome))
                        .thenReturn(heldB);
            }).doOnNext(heldB -> {
                timeline.add(WORKER_A, "resumes", "resumes", heldA.token(), "info",
                        "resumes: its connections move again and its write reaches PostgreSQL");
                workerA.services.resume();
            });

            // A's write is subscribed first, so it is sent before B even asks for the lock.
            return Mono.zip(writeA, runB).flatMap(results -> invoices.find(id).map(last -> {
                timeline.add(DATABASE, "final", WORKER_A.equals(last.processedBy()) ? "row: A's data" : "row: B's data",
                        last.fencingToken(), "info",
                        "the row holds " + last.processedBy() + "'s write"
                        + (last.fencingToken() == null ? "" : ", token " + last.fencingToken())
                        + ", ledger " + last.ledgerTotal());
                Long tokenB = results.getT2().token();
                boolean kept = WORKER_B.equals(last.processedBy()) && Objects.equals(last.fencingToken(), tokenB);
                return new ScenarioReport(arm.fencing(), id, name, variant.breakable() ? HOW_STUCK : HOW,
                        variant.leaseA().toMillis(), heldA.token(),
                        tokenB, results.getT1().rejected(), kept, results.getT1().rejection(), last, timeline.events());
            }));
        }).doFinally(signal -> stalledLocks.unregister(name));
    }

    private static Mono<Invoice> read(Connection connection, long id) {
        return Flux.from(connection.createStatement("SELECT * FROM invoices WHERE id = $1").bind(0, id).execute())
                .flatMap(result -> result.map((row, meta) -> InvoiceRepository.invoice(row)))
                .single();
    }

    private Mono<WorkerA> openWorkerA(ScenarioArm arm, Variant variant) {
        return RelayedServices.open(relayLoop, redis, environment)
                .flatMap(services -> arm.workerA(services.redis(), variant.leaseA())
                        .map(locks -> new WorkerA(locks, services))
                        .onErrorResume(e -> services.close().then(Mono.error(e))));
    }

    @Override
    public void destroy() {
        unfenced.shutdown();
        relayLoop.shutdownGracefully(0, 2, TimeUnit.SECONDS);
    }

    /** Worker A's own locks and its way to Redis and PostgreSQL, through relays. */
    private static final class WorkerA {

        final ScenarioArm.Locks locks;
        final RelayedServices services;

        WorkerA(ScenarioArm.Locks locks, RelayedServices services) {
            this.locks = locks;
            this.services = services;
        }

        Mono<Void> close() {
            services.resume();
            return locks.close().then(services.close());
        }
    }

    /**
     * How long worker A's lease is, how long worker B waits, and whether A's lock may be broken by hand while A is
     * paused.
     */
    private record Variant(Duration leaseA, Duration waitB, boolean breakable) {
    }

    private record Outcome(boolean rejected, @Nullable String rejection) {
    }

    /** A stuck run started in the background: its cached report, and its end (report or error) once it ended. */
    private record StuckRun(Mono<ScenarioReport> report, AtomicReference<Object> finished) {
        StuckRun(Mono<ScenarioReport> report) {
            this(report, new AtomicReference<>());
        }
    }

    /** Events from several threads, with offsets from one start. */
    private static final class Timeline {

        private final long start = System.nanoTime();
        private final List<ScenarioEvent> events = new ArrayList<>();

        synchronized void add(String lane, String kind, String label, @Nullable Long token, String outcome,
                String detail) {
            events.add(new ScenarioEvent(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start), lane, kind, label,
                    token, outcome, detail));
        }

        synchronized List<ScenarioEvent> events() {
            List<ScenarioEvent> sorted = new ArrayList<>(events);
            sorted.sort(Comparator.comparingLong(ScenarioEvent::offsetMs));
            return List.copyOf(sorted);
        }
    }
}
