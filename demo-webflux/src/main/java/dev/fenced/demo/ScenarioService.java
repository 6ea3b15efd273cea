package dev.fenced.demo;

import dev.fenced.spring.FencedLockAutoConfiguration;
import dev.fenced.spring.FencedProperties;

import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.LeaseNotHeldException;
import dev.fenced.lock.StaleFencingTokenException;
import io.lettuce.core.RedisURI;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryOptions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.core.env.Environment;
import org.springframework.stereotype.Service;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

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
 */
@Service
class ScenarioService implements DisposableBean {

    static final Duration WORKER_A_LEASE = Duration.ofMillis(2000);
    static final String LOCK_SERVICE = "lock-service";
    static final String WORKER_A = "worker-a";
    static final String WORKER_B = "worker-b";
    static final String DATABASE = "database";

    private static final Duration WORKER_A_WAIT = Duration.ofSeconds(5);
    private static final Duration WORKER_B_WAIT = Duration.ofSeconds(10);
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
    private final RedisURI redis;
    private final FencedArm fenced;
    private final PlainTtlArm unfenced;
    private final EventLoopGroup relayLoop = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());

    ScenarioService(FencedLockClient locks, InvoiceRepository invoices, ConnectionFactory database,
            FencedProperties properties, Environment environment) {
        this.invoices = invoices;
        this.database = database;
        this.environment = environment;
        this.redis = RedisURI.create(FencedLockAutoConfiguration.redisUri(properties, environment));
        this.fenced = new FencedArm(locks, properties.keyPrefix());
        this.unfenced = new PlainTtlArm(redis, properties.keyPrefix(), properties.leaseTime());
    }

    /** The scenario with Fenced: A's late write is rejected, B's data kept. */
    Mono<ScenarioReport> replay() {
        return replay(fenced);
    }

    /** The same timeline with a plain TTL lock and an unguarded write: A's late write overwrites B's. */
    Mono<ScenarioReport> replayWithoutFencing() {
        return replay(unfenced);
    }

    private Mono<ScenarioReport> replay(ScenarioArm arm) {
        return invoices.insertScenarioInvoice().flatMap(id -> Mono.usingWhen(
                openWorkerA(arm),
                workerA -> Mono.usingWhen(Mono.just(arm.workerB()),
                        workerB -> run(arm, id, workerA, workerB),
                        ScenarioArm.Locks::close),
                WorkerA::close,
                (workerA, error) -> workerA.close(),
                WorkerA::close));
    }

    private Mono<ScenarioReport> run(ScenarioArm arm, long id, WorkerA workerA, ScenarioArm.Locks workerB) {
        String name = InvoiceService.lockName(id);
        Timeline timeline = new Timeline();
        // A connects to PostgreSQL before it takes the lock, so that connecting does not eat into its lease.
        return Mono.usingWhen(workerA.database.create(),
                connection -> Mono.defer(() -> {
                    timeline.add(WORKER_A, "acquire", "asks for the lock", null, "waiting",
                            "asks for " + name + " with a lease of " + WORKER_A_LEASE.toMillis() + " ms");
                    return workerA.locks.acquire(name, WORKER_A_WAIT);
                }).flatMap(heldA -> {
                    timeline.add(LOCK_SERVICE, "granted", "grants A", heldA.token(), "ok",
                            "grants " + name + " to worker A " + heldA.grant());
                    heldA.lost().subscribe(lost -> timeline.add(WORKER_A, "lease-lost", "lease lost", heldA.token(),
                            "lost", lost));
                    return paused(arm, id, name, workerA, heldA, connection, workerB, timeline);
                }),
                Connection::close);
    }

    private Mono<ScenarioReport> paused(ScenarioArm arm, long id, String name, WorkerA workerA, ScenarioArm.Held heldA,
            Connection connection, ScenarioArm.Locks workerB, Timeline timeline) {
        return read(connection, id).flatMap(seenByA -> {
            timeline.add(WORKER_A, "read", "reads: ledger " + seenByA.ledgerTotal(), heldA.token(), "ok",
                    "reads invoice " + id + ": status " + seenByA.status() + ", ledger " + seenByA.ledgerTotal());
            workerA.stall();
            timeline.add(WORKER_A, "paused", "pauses", heldA.token(), "info", "is paused: its connections to Redis and "
                    + "PostgreSQL stop moving (renewals stall too)");

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
                        "asks for " + name + "; it is held by A until A's lease runs out in Redis");
                return workerB.acquire(name, WORKER_B_WAIT);
            }).flatMap(heldB -> {
                timeline.add(LOCK_SERVICE, "granted", "grants B", heldB.token(), "ok",
                        "A's lease expired unrenewed; grants " + name + " to worker B " + heldB.grant());
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
                workerA.resume();
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
                return new ScenarioReport(arm.fencing(), id, name, HOW, WORKER_A_LEASE.toMillis(), heldA.token(),
                        tokenB, results.getT1().rejected(), kept, results.getT1().rejection(), last, timeline.events());
            }));
        });
    }

    private static Mono<Invoice> read(Connection connection, long id) {
        return Flux.from(connection.createStatement("SELECT * FROM invoices WHERE id = $1").bind(0, id).execute())
                .flatMap(result -> result.map((row, meta) -> InvoiceRepository.invoice(row)))
                .single();
    }

    private Mono<WorkerA> openWorkerA(ScenarioArm arm) {
        ConnectionFactoryOptions postgres = postgresOptions();
        String postgresHost = postgres.getRequiredValue(ConnectionFactoryOptions.HOST).toString();
        Object postgresPort = postgres.getValue(ConnectionFactoryOptions.PORT);
        int port = postgresPort == null ? 5432 : Integer.parseInt(postgresPort.toString());
        return Mono.zip(StallableRelay.open(relayLoop, redis.getHost(), redis.getPort()),
                        StallableRelay.open(relayLoop, postgresHost, port))
                // Looking up the R2DBC driver reads jar files, and a lock client draws its id from SecureRandom:
                // both may block, so not on an event loop.
                .publishOn(Schedulers.boundedElastic())
                .flatMap(relays -> {
                    RedisURI viaRelay = RedisURI.create(redis.toURI().toString());
                    viaRelay.setHost("127.0.0.1");
                    viaRelay.setPort(relays.getT1().port());
                    ConnectionFactoryOptions.Builder options = ConnectionFactoryOptions.builder()
                            .option(ConnectionFactoryOptions.DRIVER, "postgresql")
                            .option(ConnectionFactoryOptions.HOST, "127.0.0.1")
                            .option(ConnectionFactoryOptions.PORT, relays.getT2().port());
                    copy(postgres, options, ConnectionFactoryOptions.DATABASE);
                    copy(postgres, options, ConnectionFactoryOptions.USER);
                    copy(postgres, options, ConnectionFactoryOptions.PASSWORD);
                    return arm.workerA(viaRelay, WORKER_A_LEASE)
                            .map(locks -> new WorkerA(locks, ConnectionFactories.get(options.build()), relays.getT1(),
                                    relays.getT2()))
                            .onErrorResume(e -> relays.getT1().close().then(relays.getT2().close())
                                    .then(Mono.error(e)));
                });
    }

    private ConnectionFactoryOptions postgresOptions() {
        String url = environment.getRequiredProperty("spring.r2dbc.url");
        ConnectionFactoryOptions.Builder options = ConnectionFactoryOptions.parse(url).mutate();
        String user = environment.getProperty("spring.r2dbc.username");
        String password = environment.getProperty("spring.r2dbc.password");
        if (user != null) {
            options.option(ConnectionFactoryOptions.USER, user);
        }
        if (password != null) {
            options.option(ConnectionFactoryOptions.PASSWORD, password);
        }
        return options.build();
    }

    @SuppressWarnings("unchecked")
    private static void copy(ConnectionFactoryOptions from, ConnectionFactoryOptions.Builder to,
            io.r2dbc.spi.Option<?> option) {
        Object value = from.getValue(option);
        if (value != null) {
            to.option((io.r2dbc.spi.Option<Object>) option, value);
        }
    }

    @Override
    public void destroy() {
        unfenced.shutdown();
        relayLoop.shutdownGracefully(0, 2, TimeUnit.SECONDS);
    }

    /** Worker A's own locks and database connection factory, both reaching their servers through relays. */
    private static final class WorkerA {

        final ScenarioArm.Locks locks;
        final ConnectionFactory database;
        private final StallableRelay redisRelay;
        private final StallableRelay postgresRelay;

        WorkerA(ScenarioArm.Locks locks, ConnectionFactory database, StallableRelay redisRelay,
                StallableRelay postgresRelay) {
            this.locks = locks;
            this.database = database;
            this.redisRelay = redisRelay;
            this.postgresRelay = postgresRelay;
        }

        void stall() {
            redisRelay.stall();
            postgresRelay.stall();
        }

        void resume() {
            redisRelay.resume();
            postgresRelay.resume();
        }

        Mono<Void> close() {
            resume();
            return locks.close().then(redisRelay.close()).then(postgresRelay.close());
        }
    }

    private record Outcome(boolean rejected, @Nullable String rejection) {
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
