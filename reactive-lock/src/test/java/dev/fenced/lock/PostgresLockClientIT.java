package dev.fenced.lock;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

/** The lock client on PostgreSQL, through the public API only. */
@ExtendWith(PostgresServerExtension.class)
class PostgresLockClientIT {

    private static final Duration BOUND = Duration.ofSeconds(20);
    /** A table of its own, so that its LISTEN connections are this suite's alone. */
    private static final PostgresLeaseTable TABLE = PostgresLeaseTable.named("fenced_lease_client_it");

    private ConnectionPool pool;
    private String prefix;
    private final List<FencedLockClient> clients = new ArrayList<>();

    @BeforeEach
    void setUp(PostgresServer postgres) {
        pool = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(postgres.r2dbcUrl()))
                .maxSize(8).build());
        TABLE.create(pool).block(BOUND);
        prefix = "it-" + UUID.randomUUID() + ":";
    }

    @AfterEach
    void tearDown() {
        Collections.reverse(clients);
        clients.forEach(FencedLockClient::close);
        pool.disposeLater().block(BOUND);
    }

    private FencedLockClient client(FencedLockClientBuilder builder) {
        FencedLockClient client = builder.postgres(pool, TABLE).keyPrefix(prefix).build();
        clients.add(client);
        return client;
    }

    private String lockId(String name) {
        return prefix + "{" + name + "}";
    }

    private <T> List<T> sql(String sql, Class<T> type, Object... args) {
        return Flux.usingWhen(pool.create(), c -> {
            Statement statement = c.createStatement(sql);
            for (int i = 0; i < args.length; i++) {
                statement.bind(i, args[i]);
            }
            return Flux.from(statement.execute()).concatMap(r -> r.map((row, meta) -> row.get(0, type)));
        }, Connection::close).collectList().block(BOUND);
    }

    /** Polls {@code condition} on the test thread (it blocks) until it holds, for at most the bound. */
    private static void await(String what, BooleanSupplier condition) {
        long deadline = System.nanoTime() + BOUND.toNanos();
        while (!condition.getAsBoolean()) {
            assertThat(deadline - System.nanoTime()).as("still waiting for: " + what).isPositive();
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20));
        }
    }

    private boolean someoneListens() {
        return !sql("SELECT pid FROM pg_stat_activity WHERE query = $1", Integer.class,
                "LISTEN \"" + TABLE.name() + "\"").isEmpty();
    }

    @Test
    void releaseWakesAWaiterThroughNotify() throws Exception {
        FencedLockClient holderClient = client(FencedLockClient.builder().leaseTime(Duration.ofSeconds(60)));
        FencedLockClient waiterClient = client(FencedLockClient.builder());
        FencedLease holder = holderClient.acquire("notified").block(BOUND);
        assertThat(holder).isNotNull();
        assertThat(holder.lockId()).isEqualTo(lockId("notified"));

        CompletableFuture<FencedLease> waiting = waiterClient
                .acquire("notified", AcquireOptions.defaults().withMaxWait(Duration.ofSeconds(20)))
                .toFuture();
        await("the waiter listens", this::someoneListens);
        assertThat(waiting).isNotDone();

        StepVerifier.create(holder.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();
        // The holder's row would be valid for 60 s: only the notification can wake the waiter within 20 s.
        FencedLease next = waiting.get(20, TimeUnit.SECONDS);
        assertThat(next.token()).isGreaterThan(holder.token());
        assertThat(sql("SELECT owner FROM " + TABLE.name() + " WHERE lock_id = $1", String.class, lockId("notified")))
                .containsExactly(next.ownerId());
        StepVerifier.create(next.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();
        assertThat(sql("SELECT token FROM " + TABLE.name() + " WHERE lock_id = $1 AND owner IS NULL", Long.class,
                lockId("notified"))).containsExactly(next.token());
    }

    @Test
    void aLeaseWhoseRowIsTakenOverIsLost() {
        FencedLockClient client = client(FencedLockClient.builder().leaseTime(Duration.ofSeconds(2)));
        FencedLease lease = client.acquire("taken").block(BOUND);
        assertThat(lease).isNotNull();
        sql("UPDATE " + TABLE.name() + " SET owner = 'thief', token = token + 1 WHERE lock_id = $1 RETURNING token",
                Long.class, lockId("taken"));
        StepVerifier.create(lease.lost())
                .assertNext(lost -> {
                    assertThat(lost.reason()).isEqualTo(LossReason.NOT_HELD);
                    assertThat(lost.token()).isEqualTo(lease.token());
                })
                .verifyComplete();
        assertThat(lease.isHeld()).isFalse();
        StepVerifier.create(lease.release()).expectNext(ReleaseOutcome.NOT_HELD).verifyComplete();
    }

    @Test
    void heldLeasesAreRenewedByTheDatabase() {
        FencedLockClient client = client(FencedLockClient.builder().leaseTime(Duration.ofSeconds(1)));
        FencedLease lease = client.acquire("renewed").block(BOUND);
        assertThat(lease).isNotNull();
        // Several renewals later the row's expiry has moved past the grant's.
        String expiry = "SELECT (extract(epoch FROM expires_at) * 1000)::bigint FROM " + TABLE.name() + " WHERE lock_id = $1";
        long granted = sql(expiry, Long.class, lockId("renewed")).get(0);
        await("a renewal", () -> sql(expiry, Long.class, lockId("renewed")).get(0) > granted);
        assertThat(lease.isHeld()).isTrue();
        StepVerifier.create(lease.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();
    }

    @Test
    void withLeaseRunsTheWorkAndReleases() {
        FencedLockClient client = client(FencedLockClient.builder());
        StepVerifier.create(client.withLease("scoped", lease -> Mono.just(lease.token())))
                .assertNext(token -> assertThat(token).isPositive())
                .verifyComplete();
        assertThat(sql("SELECT owner FROM " + TABLE.name() + " WHERE lock_id = $1 AND owner IS NOT NULL", String.class,
                lockId("scoped"))).isEmpty();
    }
}
