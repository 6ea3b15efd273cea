package dev.fenced.demo;

import dev.fenced.spring.FencedLockAutoConfiguration;
import dev.fenced.spring.FencedProperties;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.LeaseNotHeldException;
import dev.fenced.lock.StaleFencingTokenException;
import dev.fenced.r2dbc.FencedWrite;
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
 * Replays the failure Fenced exists for, live, against the real Redis and PostgreSQL.
 *
 * <p>Worker A takes the invoice's lock with a short lease and reads the invoice. Then A is paused: its
 * connections to Redis and to PostgreSQL go through {@link StallableRelay}s, which stop moving bytes. A sends its
 * write while its lease is still valid by its own clock, so the write passes every local check and then waits on
 * the wire, as a write does when its sender is paused by a garbage collector right after checking its lease.
 * A's renewals stall the same way, so Redis lets A's key expire. Worker B (the application's own lock client,
 * connected directly) is granted the lock with the next token and writes. When A's connections move again, its
 * write reaches PostgreSQL with the older token, and the fenced update rejects it with
 * {@link StaleFencingTokenException}: B's data is kept.
 */
@Service
class ScenarioService implements DisposableBean {

    static final Duration WORKER_A_LEASE = Duration.ofMillis(2000);
    static final String LOCK_SERVICE = "lock-service";
    static final String WORKER_A = "worker-a";
    static final String WORKER_B = "worker-b";
    static final String DATABASE = "database";

    private static final String HOW = "Worker A's connections to Redis and to PostgreSQL run through in-app TCP relays. "
            + "After A acquired the lock (lease " + WORKER_A_LEASE.toMillis() + " ms) and read the invoice, the relays "
            + "stop moving bytes: A is paused as a whole, like a process stopped by a long GC pause or a network stall. "
            + "A sends its write while its lease is still valid by its own clock, so the write passes every local check "
            + "and waits on the wire. A's renewals cannot reach Redis either, so Redis lets the lease expire and grants "
            + "the lock to worker B with the next token. Once B has written, the relays move again and A's write arrives "
            + "with the old token. Nothing is faked: the tokens come from Redis and the rejection from PostgreSQL's "
            + "token-guarded UPDATE.";

    private final FencedLockClient locks;
    private final InvoiceRepository invoices;
    private final FencedProperties properties;
    private final Environment environment;
    private final EventLoopGroup relayLoop = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());

    ScenarioService(FencedLockClient locks, InvoiceRepository invoices, FencedProperties properties,
            Environment environment) {
        this.locks = locks;
        this.invoices = invoices;
        this.properties = properties;
        this.environment = environment;
    }

    Mono<ScenarioReport> replay() {
        return invoices.insertScenarioInvoice().flatMap(id -> Mono.usingWhen(
                openWorkerA(),
                workerA -> run(id, workerA),
                WorkerA::close,
                (workerA, error) -> workerA.close(),
                WorkerA::close));
    }

    private Mono<ScenarioReport> run(long id, WorkerA workerA) {
        String name = InvoiceService.lockName(id);
        Timeline timeline = new Timeline();
        AcquireOptions aOptions = AcquireOptions.defaults().withLeaseTime(WORKER_A_LEASE).withMaxWait(Duration.ofSeconds(5));
        // A connects to PostgreSQL before it takes the lock, so that connecting does not eat into its lease.
        return Mono.usingWhen(workerA.database.create(),
                connection -> Mono.defer(() -> {
                    timeline.add(WORKER_A, "acquire", null, "waiting", "asks for " + name + " with a lease of "
                            + WORKER_A_LEASE.toMillis() + " ms");
                    return workerA.locks.acquire(name, aOptions);
                }).flatMap(leaseA -> {
                    timeline.add(LOCK_SERVICE, "granted", leaseA.token(), "ok", "grants " + name
                            + " to worker A with token " + leaseA.token());
                    leaseA.lost().subscribe(lost -> timeline.add(WORKER_A, "lease-lost", lost.token(), "lost",
                            "A's client notices its lease is gone (" + lost.reason() + "): its renewals never reached "
                                    + "Redis. Its write is already on the wire."));
                    return paused(id, name, workerA, leaseA, connection, timeline);
                }),
                Connection::close);
    }

    private Mono<ScenarioReport> paused(long id, String name, WorkerA workerA, FencedLease leaseA, Connection connection,
            Timeline timeline) {
        return read(connection, id).flatMap(seenByA -> {
            timeline.add(WORKER_A, "read", leaseA.token(), "ok", "reads invoice " + id + ": status " + seenByA.status()
                    + ", ledger " + seenByA.ledgerTotal());
            workerA.stall();
            timeline.add(WORKER_A, "paused", leaseA.token(), "info", "is paused: its connections to Redis and "
                    + "PostgreSQL stop moving (renewals stall too)");

            Mono<Outcome> writeA = Mono.defer(() -> {
                timeline.add(WORKER_A, "write-sent", leaseA.token(), "waiting", "sends its write with token "
                        + leaseA.token() + "; its lease is still valid for " + leaseA.remainingValidity().toMillis()
                        + " ms by its own clock, so the write passes the local check and waits on the wire");
                return FencedWrite.into(InvoiceRepository.TABLE).key("id", id)
                        .set("status", "PROCESSED")
                        .set("ledger_total", seenByA.ledgerTotal() + seenByA.amount())
                        .set("times_processed", seenByA.timesProcessed() + 1)
                        .set("processed_by", WORKER_A)
                        .update(connection, leaseA);
            }).map(rows -> {
                timeline.add(DATABASE, "accepted", leaseA.token(), "ok", "accepted worker A's late write: fencing failed");
                timeline.add(WORKER_A, "wrote", leaseA.token(), "ok", "believes it wrote");
                return new Outcome(false, null);
            }).onErrorResume(StaleFencingTokenException.class, e -> {
                timeline.add(DATABASE, "rejected", e.presentedToken(), "rejected", "rejects worker A's write: token "
                        + e.presentedToken() + " is older than the stored token " + e.storedToken());
                timeline.add(WORKER_A, "rejected", e.presentedToken(), "rejected",
                        "gets StaleFencingTokenException: " + e.getMessage());
                return Mono.just(new Outcome(true, e.getMessage()));
            }).onErrorResume(LeaseNotHeldException.class, e -> {
                // Only when this machine was too slow to send the write within A's lease: then A's own check stops it.
                timeline.add(WORKER_A, "refused-locally", leaseA.token(), "lost", "its client refused to send the "
                        + "write: the lease had already run out before the pause (" + e.getMessage() + ")");
                return Mono.just(new Outcome(false, e.getMessage()));
            });

            Mono<Long> workerB = Mono.defer(() -> {
                timeline.add(WORKER_B, "acquire", null, "waiting", "asks for " + name + "; it is held by A until A's "
                        + "lease runs out in Redis");
                return locks.acquire(name, AcquireOptions.defaults().withMaxWait(Duration.ofSeconds(10)));
            }).flatMap(leaseB -> {
                timeline.add(LOCK_SERVICE, "granted", leaseB.token(), "ok", "A's lease expired unrenewed; grants "
                        + name + " to worker B with token " + leaseB.token());
                return invoices.find(id)
                        .flatMap(seenByB -> invoices.process(seenByB, leaseB, WORKER_B))
                        .doOnNext(rows -> {
                            timeline.add(DATABASE, "accepted", leaseB.token(), "ok", "accepts worker B's write with token "
                                    + leaseB.token());
                            timeline.add(WORKER_B, "wrote", leaseB.token(), "ok", "wrote with token " + leaseB.token());
                        })
                        .then(leaseB.release())
                        .doOnNext(outcome -> timeline.add(WORKER_B, "released", leaseB.token(), "ok",
                                "releases the lock (" + outcome + ")"))
                        .thenReturn(leaseB.token());
            }).doOnNext(tokenB -> {
                timeline.add(WORKER_A, "resumes", leaseA.token(), "info", "resumes: its connections move again and its "
                        + "write with token " + leaseA.token() + " reaches PostgreSQL");
                workerA.resume();
            });

            // A's write is subscribed first, so it is sent before B even asks for the lock.
            return Mono.zip(writeA, workerB).flatMap(results -> invoices.find(id).map(last -> {
                timeline.add(DATABASE, "final", last.fencingToken(), "info", "the row holds " + last.processedBy()
                        + "'s write, token " + last.fencingToken() + ", ledger " + last.ledgerTotal());
                long tokenB = results.getT2();
                boolean kept = WORKER_B.equals(last.processedBy()) && Objects.equals(last.fencingToken(), tokenB);
                return new ScenarioReport(id, name, HOW, WORKER_A_LEASE.toMillis(), leaseA.token(), tokenB,
                        results.getT1().rejected(), kept, results.getT1().rejection(), last, timeline.events());
            }));
        });
    }

    private static Mono<Invoice> read(Connection connection, long id) {
        return Flux.from(connection.createStatement("SELECT * FROM invoices WHERE id = $1").bind(0, id).execute())
                .flatMap(result -> result.map((row, meta) -> InvoiceRepository.invoice(row)))
                .single();
    }

    private Mono<WorkerA> openWorkerA() {
        RedisURI redis = RedisURI.create(FencedLockAutoConfiguration.redisUri(properties, environment));
        ConnectionFactoryOptions postgres = postgresOptions();
        String postgresHost = postgres.getRequiredValue(ConnectionFactoryOptions.HOST).toString();
        Object postgresPort = postgres.getValue(ConnectionFactoryOptions.PORT);
        int port = postgresPort == null ? 5432 : Integer.parseInt(postgresPort.toString());
        return Mono.zip(StallableRelay.open(relayLoop, redis.getHost(), redis.getPort()),
                        StallableRelay.open(relayLoop, postgresHost, port))
                // Building a lock client draws its id from SecureRandom, which may block: not on an event loop.
                .publishOn(Schedulers.boundedElastic())
                .map(relays -> {
                    RedisURI viaRelay = RedisURI.create(redis.toURI().toString());
                    viaRelay.setHost("127.0.0.1");
                    viaRelay.setPort(relays.getT1().port());
                    FencedLockClient clientA = FencedLockClient.builder()
                            .redisUri(viaRelay)
                            .keyPrefix(properties.keyPrefix())
                            .leaseTime(WORKER_A_LEASE)
                            .commandTimeout(Duration.ofMillis(250))
                            .build();
                    ConnectionFactoryOptions.Builder options = ConnectionFactoryOptions.builder()
                            .option(ConnectionFactoryOptions.DRIVER, "postgresql")
                            .option(ConnectionFactoryOptions.HOST, "127.0.0.1")
                            .option(ConnectionFactoryOptions.PORT, relays.getT2().port());
                    copy(postgres, options, ConnectionFactoryOptions.DATABASE);
                    copy(postgres, options, ConnectionFactoryOptions.USER);
                    copy(postgres, options, ConnectionFactoryOptions.PASSWORD);
                    return new WorkerA(clientA, ConnectionFactories.get(options.build()), relays.getT1(), relays.getT2());
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
        relayLoop.shutdownGracefully(0, 2, TimeUnit.SECONDS);
    }

    /** Worker A's own lock client and database connection factory, both reaching their servers through relays. */
    private static final class WorkerA {

        final FencedLockClient locks;
        final ConnectionFactory database;
        private final StallableRelay redisRelay;
        private final StallableRelay postgresRelay;

        WorkerA(FencedLockClient locks, ConnectionFactory database, StallableRelay redisRelay,
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
            return locks.closeLater().then(redisRelay.close()).then(postgresRelay.close());
        }
    }

    private record Outcome(boolean rejected, @Nullable String rejection) {
    }

    /** Events from several threads, with offsets from one start. */
    private static final class Timeline {

        private final long start = System.nanoTime();
        private final List<ScenarioEvent> events = new ArrayList<>();

        synchronized void add(String lane, String kind, @Nullable Long token, String outcome, String detail) {
            events.add(new ScenarioEvent(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start), lane, kind, token,
                    outcome, detail));
        }

        synchronized List<ScenarioEvent> events() {
            List<ScenarioEvent> sorted = new ArrayList<>(events);
            sorted.sort(Comparator.comparingLong(ScenarioEvent::offsetMs));
            return List.copyOf(sorted);
        }
    }
}
