package dev.fenced.r2dbc;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.LossReason;
import dev.fenced.lock.ReleaseOutcome;
import dev.fenced.lock.StaleFencingTokenException;
import dev.fenced.lock.TokenScheme;
import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import dev.fenced.testservices.RedisServer;
import dev.fenced.testservices.RedisServerExtension;
import dev.fenced.testservices.TcpProxy;
import io.lettuce.core.RedisClient;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

/** The lock and the storage together, on real Redis and PostgreSQL. */
@ExtendWith({RedisServerExtension.class, PostgresServerExtension.class})
class FencedTimelineIT {

    private static final Duration BOUND = Duration.ofSeconds(30);

    private RedisServer redis;
    private TestDatabase db;
    private String table;
    private String prefix;

    @BeforeEach
    void setUp(RedisServer redis, PostgresServer postgres) {
        this.redis = redis;
        this.prefix = "timeline-" + UUID.randomUUID() + ":";
        db = TestDatabase.postgres(postgres);
        table = TestDatabase.uniqueName("invoices");
        db.execute("CREATE TABLE " + table + " (id bigint PRIMARY KEY, status text NOT NULL, amount bigint NOT NULL, "
                + "fencing_token bigint, fencing_owner text)", "INSERT INTO " + table + " (id, status, amount) VALUES (42, 'OPEN', 0)");
    }

    @AfterEach
    void tearDown() {
        db.execute("DROP TABLE IF EXISTS " + table);
        db.close();
    }

    private FencedLockClient client(String uri, Duration leaseTime) {
        return FencedLockClient.builder().redisUri(uri).keyPrefix(prefix).leaseTime(leaseTime).build();
    }

    /** A client with consecutive counter tokens, which start again from 1 when Redis loses the counter. */
    private FencedLockClient counterClient(String uri, Duration leaseTime) {
        return FencedLockClient.builder().redisUri(uri).keyPrefix(prefix).leaseTime(leaseTime)
                .tokenScheme(TokenScheme.COUNTER).build();
    }

    private FencedWrite invoice(String status, long amount) {
        return FencedWrite.into(table).key("id", 42).set("status", status).set("amount", amount);
    }

    private List<Object> row() {
        return db.query("SELECT status, amount, fencing_token, fencing_owner FROM " + table + " WHERE id = 42").get(0);
    }

    @Test
    void stalledHolderIsRejectedByStorage() {
        try (TcpProxy toRedisForA = TcpProxy.start(redis.host(), redis.port());
                FencedLockClient a = client("redis://" + toRedisForA.host() + ":" + toRedisForA.port(), Duration.ofSeconds(1));
                FencedLockClient b = client(redis.uri(), Duration.ofSeconds(30))) {
            FencedLease leaseA = a.acquire("invoice:42").block(BOUND);
            assertThat(leaseA).isNotNull();
            // A checks its lease, then stalls longer than the lease: its renewals cannot get through either.
            FencedLease whatAStillBelieves = new TestLease(leaseA.name(), leaseA.token(), leaseA.ownerId());
            toRedisForA.blackhole();

            FencedLease leaseB = b.acquire("invoice:42", AcquireOptions.defaults().withMaxWait(Duration.ofSeconds(10))).block(BOUND);
            assertThat(leaseB).isNotNull();
            assertThat(leaseB.token()).isGreaterThan(leaseA.token());
            StepVerifier.create(invoice("PAID-BY-B", 200).update(db.connections, leaseB)).expectNext(1L).verifyComplete();

            // A wakes up and writes what it computed before the stall.
            StepVerifier.create(invoice("PAID-BY-A", 100).update(db.connections, whatAStillBelieves))
                    .verifyErrorSatisfies(e -> {
                        assertThat(e).isInstanceOf(StaleFencingTokenException.class);
                        StaleFencingTokenException stale = (StaleFencingTokenException) e;
                        assertThat(stale.presentedToken()).isEqualTo(leaseA.token());
                        assertThat(stale.storedToken()).isEqualTo(leaseB.token());
                    });
            assertThat(row()).containsExactly("PAID-BY-B", 200L, leaseB.token(), leaseB.ownerId());
            StepVerifier.create(leaseA.lost()).assertNext(e -> assertThat(e.reason()).isIn(LossReason.EXPIRED, LossReason.SUPERSEDED))
                    .verifyComplete();
            toRedisForA.resume();
        }
    }

    @Test
    void stalledHolderIsRejectedAfterRedisLostTheCounterWhileItWasStalled() {
        RedisClient admin = RedisClient.create(redis.uri());
        try (TcpProxy toRedisForA = TcpProxy.start(redis.host(), redis.port());
                FencedLockClient a = client("redis://" + toRedisForA.host() + ":" + toRedisForA.port(), Duration.ofSeconds(1));
                FencedLockClient b = client(redis.uri(), Duration.ofSeconds(30))) {
            for (int i = 0; i < 3; i++) {
                b.withLease("invoice:42", lease -> Mono.just(lease.token())).blockLast(BOUND);
            }
            FencedLease leaseA = a.acquire("invoice:42").block(BOUND);
            assertThat(leaseA).isNotNull();
            FencedLease whatAStillBelieves = new TestLease(leaseA.name(), leaseA.token(), leaseA.ownerId());
            toRedisForA.blackhole();
            // While A stalls, Redis restarts without persistence: the lock and its token counter are gone.
            admin.connect().sync().del(prefix + "{invoice:42}", prefix + "{invoice:42}:fence");

            FencedLease leaseB = b.acquire("invoice:42").block(BOUND);
            assertThat(leaseB).isNotNull();
            assertThat(leaseB.token()).as("the token after the counter was lost").isGreaterThan(leaseA.token());
            StepVerifier.create(invoice("PAID-BY-B", 200).update(db.connections, leaseB)).expectNext(1L).verifyComplete();

            StepVerifier.create(invoice("PAID-BY-A", 100).update(db.connections, whatAStillBelieves))
                    .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(StaleFencingTokenException.class));
            assertThat(row()).containsExactly("PAID-BY-B", 200L, leaseB.token(), leaseB.ownerId());
            StepVerifier.create(leaseB.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();
            toRedisForA.resume();
        } finally {
            admin.shutdown();
        }
    }

    @Test
    void storageFloorRestoresProgressAfterRedisLostTheCounter() {
        RedisClient admin = RedisClient.create(redis.uri());
        try (FencedLockClient locks = counterClient(redis.uri(), Duration.ofSeconds(30))) {
            for (int i = 0; i < 5; i++) {
                FencedWrite write = invoice("WRITE-" + i, 1);
                locks.withLease("invoice:42", lease -> write.update(db.connections)).blockLast(BOUND);
            }
            assertThat(row().get(2)).isEqualTo(5L);

            // Redis loses the lock's keys (a restart without persistence, a failover that lost writes).
            admin.connect().sync().del(prefix + "{invoice:42}", prefix + "{invoice:42}:fence");

            StepVerifier.create(locks.withLease("invoice:42", lease -> invoice("LOW-TOKEN", 2).update(db.connections)))
                    .verifyErrorSatisfies(e -> {
                        assertThat(e).isInstanceOf(LeaseLostException.class);
                        assertThat(((LeaseLostException) e).reason()).isEqualTo(LossReason.SUPERSEDED);
                        StaleFencingTokenException stale = (StaleFencingTokenException) e.getCause();
                        assertThat(stale.presentedToken()).isEqualTo(1);
                        assertThat(stale.storedToken()).isEqualTo(5);
                    });

            FencedLease next = locks.acquire("invoice:42").block(BOUND);
            assertThat(next).isNotNull();
            assertThat(next.token()).isEqualTo(6);
            StepVerifier.create(invoice("CAUGHT-UP", 3).update(db.connections, next)).expectNext(1L).verifyComplete();
            assertThat(row()).containsExactly("CAUGHT-UP", 3L, 6L, next.ownerId());
            StepVerifier.create(next.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();
        } finally {
            admin.shutdown();
        }
    }

    @Test
    void rejectedWriteLosesTheLeaseOfWorkThatCarriesOn() {
        try (FencedLockClient locks = counterClient(redis.uri(), Duration.ofSeconds(30))) {
            StepVerifier.create(invoice("NEWER", 1).update(db.connections, new TestLease("invoice:42", 1_000, "elsewhere")))
                    .expectNext(1L).verifyComplete();
            // The work swallows the rejection and carries on: the lease's loss cancels it.
            StepVerifier.create(locks.withLease("invoice:42", lease -> invoice("STALE", 2).update(db.connections)
                            .onErrorResume(StaleFencingTokenException.class, e -> Mono.never())))
                    .expectErrorSatisfies(e -> assertThat(((LeaseLostException) e).reason()).isEqualTo(LossReason.SUPERSEDED))
                    .verify(BOUND);
            FencedLease next = locks.acquire("invoice:42").block(BOUND);
            assertThat(next).isNotNull();
            assertThat(next.token()).isEqualTo(1_001);
        }
    }
}
