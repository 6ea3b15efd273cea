package dev.fenced.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import dev.fenced.testservices.RedisSentinels;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Flux;
import reactor.test.StepVerifier;

/**
 * The lock client through Sentinel on a real primary, replica and three Sentinels started on loopback
 * ports: a failover under held leases, acquires after promotion, and replica acknowledgement.
 */
class RedisSentinelIT {

    private static final Duration BOUND = Duration.ofSeconds(30);
    private static final Duration LEASE = Duration.ofSeconds(3);

    private RedisSentinels group;
    private String prefix;
    private final List<FencedLockClient> clients = new ArrayList<>();

    @BeforeEach
    void setUp() {
        group = RedisSentinels.start();
        prefix = "sentinel-" + UUID.randomUUID().toString().substring(0, 8) + ":";
    }

    @AfterEach
    void tearDown() {
        clients.forEach(FencedLockClient::close);
        group.close();
    }

    private FencedLockClient client(int replicas) {
        FencedLockClientBuilder builder = FencedLockClient.builder()
                .redisUri(group.sentinelUri())
                .keyPrefix(prefix)
                .leaseTime(LEASE)
                .maxWait(BOUND);
        if (replicas > 0) {
            builder.replicaAcknowledgement(replicas, Duration.ofMillis(500));
        }
        FencedLockClient client = builder.build();
        clients.add(client);
        return client;
    }

    @Test
    void afterTheFailoverLeasesAreRenewedOnTheNewPrimaryOrReportedLostAndAcquiresWork() throws Exception {
        FencedLockClient locks = client(0);
        FencedLockClient acknowledged = client(1);
        List<FencedLease> held = Flux.range(0, 20).flatMap(i -> locks.acquire("held-" + i)).collectList().block(BOUND);
        FencedLease safe = acknowledged.acquire("acknowledged").block(BOUND);

        group.killPrimary();
        group.awaitFailover(BOUND);
        // Two lease times after promotion: a lease still held by now was renewed on the new primary.
        Thread.sleep(2 * LEASE.toMillis());

        for (FencedLease lease : held) {
            if (lease.isHeld()) {
                String key = prefix + "{" + lease.name() + "}";
                assertThat(group.replica().call("GET", key)).as(lease.name() + " is held, so it lives on the new primary")
                        .isEqualTo(lease.ownerId() + ":" + lease.token());
            } else {
                assertThat(lease.lost().block(BOUND)).as(lease.name()).isNotNull();
            }
        }
        FencedLease after = locks.acquire("after-failover").block(BOUND);
        assertThat(after.token()).isPositive();

        // The replica acknowledged the acquire's token counter before the primary died: the next token is higher.
        safe.release().block(BOUND);
        FencedLease next = locks.acquire("acknowledged").block(BOUND);
        assertThat(next.token()).isGreaterThan(safe.token());
    }

    @Test
    void withReplicaAcknowledgementAFailoverBeforeTheFirstRenewalLosesTheLease() {
        // A lease long enough that no renewal (the command connection's first connect) comes within the test: only
        // the connection that acquires with WAIT has seen the old primary.
        FencedLockClient acknowledged = FencedLockClient.builder()
                .redisUri(group.sentinelUri())
                .keyPrefix(prefix)
                .leaseTime(Duration.ofMinutes(5))
                .replicaAcknowledgement(1, Duration.ofMillis(500))
                .build();
        clients.add(acknowledged);
        FencedLease before = acknowledged.acquire("before-failover").block(BOUND);
        assertThat(before).isNotNull();

        group.killPrimary();
        group.awaitFailover(BOUND);

        // The replica acknowledged the lock, so the new primary holds it too; only the change of identity, found
        // when the WAIT connection reconnects, tells the client that the server that granted it is gone.
        StepVerifier.create(before.lost())
                .assertNext(loss -> assertThat(loss.reason()).isEqualTo(LossReason.SERVER_CHANGED))
                .expectComplete()
                .verify(BOUND);
        assertThat(before.isHeld()).isFalse();
    }

    @Test
    void aClientPointedAtAReplicaIsWarnedAndItsAcquiresFail() throws Exception {
        Logger checks = (Logger) LoggerFactory.getLogger("dev.fenced.lock.internal.redis.ServerChecks");
        ListAppender<ILoggingEvent> warnings = new ListAppender<>();
        warnings.start();
        checks.addAppender(warnings);
        try {
            FencedLockClient misdirected = FencedLockClient.builder().redisUri(group.replica().uri()).keyPrefix(prefix).build();
            clients.add(misdirected);

            assertThatThrownBy(() -> misdirected.acquire("on-a-replica").block(BOUND))
                    .isInstanceOf(LockServiceException.class)
                    .hasMessageContaining("READONLY");
            assertThat(warnings.list).anySatisfy(event -> {
                assertThat(event.getLevel()).isEqualTo(Level.WARN);
                assertThat(event.getFormattedMessage()).contains("is a replica");
            });
        } finally {
            checks.detachAppender(warnings);
        }
    }

    @Test
    void tooFewReplicasFailTheAcquireAndLeaveTheLockFree() {
        FencedLockClient greedy = client(2);
        FencedLockClient other = client(0);

        assertThatThrownBy(() -> greedy.acquire("greedy").block(BOUND))
                .isInstanceOfSatisfying(ReplicaAcknowledgementException.class, e -> {
                    assertThat(e.required()).isEqualTo(2);
                    assertThat(e.acknowledged()).isEqualTo(1);
                    assertThat(e.lockName()).isEqualTo("greedy");
                });
        assertThat(other.tryAcquire("greedy").blockOptional(BOUND)).as("the lock was released again").isPresent();
    }
}
