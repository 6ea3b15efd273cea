package dev.fenced.lock;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.testservices.RedisProcess;
import dev.fenced.testservices.TcpProxy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.test.StepVerifier;

/**
 * A server that comes back as another server (a restart without persistence, a failover to a replica that
 * missed writes) may have lost every lock: the client compares {@code run_id} and {@code master_replid} on
 * every reconnect and reports every lease held there lost at once, before it emits a lease of the new
 * server. Real redis-server processes, behind a proxy that stands for the network.
 */
class ServerIdentityIT {

    private static final Duration BOUND = Duration.ofSeconds(20);

    private RedisProcess first;
    private final List<AutoCloseable> toClose = new ArrayList<>();

    @BeforeEach
    void start() {
        first = RedisProcess.start();
        toClose.add(first);
    }

    @AfterEach
    void stop() throws Exception {
        for (int i = toClose.size() - 1; i >= 0; i--) {
            toClose.get(i).close();
        }
    }

    private FencedLockClient client(String uri) {
        // A long lease: renewals (every 20 s) cannot be what finds the loss within the test's bound.
        FencedLockClient client = FencedLockClient.builder().redisUri(uri).leaseTime(Duration.ofMinutes(1)).build();
        toClose.add(client);
        return client;
    }

    private static List<FencedLease> hold(FencedLockClient client, String... names) {
        List<FencedLease> leases = new ArrayList<>();
        for (String name : names) {
            FencedLease lease = client.acquire(name).block(BOUND);
            assertThat(lease).isNotNull();
            leases.add(lease);
        }
        return leases;
    }

    @Test
    void aRestartLosesEveryHeldLeaseBeforeTheNewServerGrantsOne() throws InterruptedException {
        FencedLockClient client = client(first.uri());
        List<FencedLease> held = hold(client, "a", "b", "c");

        first.restart(); // same port, no persistence: the locks and their counters are gone
        FencedLease again = awaitGrant(client, "a");

        for (FencedLease lease : held) {
            assertThat(lease.isHeld()).as("lost before the new server's grant was emitted").isFalse();
            StepVerifier.create(lease.lost())
                    .assertNext(loss -> assertThat(loss)
                            .hasMessage("Lease on lock '" + lease.name() + "' with fencing token " + lease.token()
                                    + " was lost: the lock service restarted, failed over or lost its data (its run_id "
                                    + "or replication id changed)")
                            .extracting(LeaseLostException::reason).isEqualTo(LossReason.SERVER_CHANGED))
                    .expectComplete()
                    .verify(BOUND);
        }
        assertThat(again.isHeld()).isTrue();
        assertThat(again.token()).as("server-time tokens after the counter was lost").isGreaterThan(held.get(0).token());
        assertThat(client.heldLeases()).isEqualTo(1);
    }

    @Test
    void aFailoverToAnotherServerLosesEveryHeldLease() throws InterruptedException {
        RedisProcess second = RedisProcess.start();
        toClose.add(second);
        TcpProxy network = TcpProxy.start(first.host(), first.port());
        toClose.add(network);
        FencedLockClient client = client("redis://" + network.host() + ":" + network.port());
        List<FencedLease> held = hold(client, "x", "y");

        // The address now leads to another server, as after a failover behind a virtual IP.
        network.retarget(second.host(), second.port());
        network.resetAll();
        awaitGrant(client, "z");

        for (FencedLease lease : held) {
            StepVerifier.create(lease.lost())
                    .assertNext(loss -> assertThat(loss.reason()).isEqualTo(LossReason.SERVER_CHANGED))
                    .expectComplete()
                    .verify(BOUND);
        }
    }

    @Test
    void aReconnectToTheSameServerKeepsEveryLease() throws InterruptedException {
        TcpProxy network = TcpProxy.start(first.host(), first.port());
        toClose.add(network);
        FencedLockClient client = client("redis://" + network.host() + ":" + network.port());
        List<FencedLease> held = hold(client, "p", "q");

        network.resetAll();
        awaitGrant(client, "r");

        for (FencedLease lease : held) {
            assertThat(lease.isHeld()).isTrue();
            StepVerifier.create(lease.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();
        }
    }

    @Test
    void aGrantOfTheOldServerThatArrivesAfterTheNewOneWasFoundIsNotEmitted() throws InterruptedException {
        // Two servers with a replica each, for WAIT; the address (the proxy) leads to the first.
        RedisProcess firstReplica = replicaOf(first);
        RedisProcess second = RedisProcess.start();
        toClose.add(second);
        RedisProcess secondReplica = replicaOf(second);
        TcpProxy network = TcpProxy.start(first.host(), first.port());
        toClose.add(network);
        FencedLockClient client = FencedLockClient.builder().redisUri("redis://" + network.host() + ":" + network.port())
                .leaseTime(Duration.ofMinutes(1)).replicaAcknowledgement(1, Duration.ofSeconds(2)).build();
        toClose.add(client);
        FencedLease before = client.acquire("before").block(BOUND); // on the connection that acquires with WAIT
        assertThat(before).isNotNull();
        assertThat(client.ping().block(BOUND)).isNotNull(); // the command connection, on the first server too

        // The address now leads to the second server; only the command connection is cut, and reconnects there.
        network.retarget(second.host(), second.port());
        network.resetAfterRequestContaining("PING", 1);
        client.ping().onErrorResume(e -> reactor.core.publisher.Mono.empty()).block(BOUND);
        StepVerifier.create(before.lost())
                .assertNext(loss -> assertThat(loss.reason()).isEqualTo(LossReason.SERVER_CHANGED))
                .verifyComplete();

        // The WAIT connection still reaches the first server: a grant made there must not be emitted as held.
        FencedLease after = awaitGrant(client, "after");
        assertThat(second.call("GET", "fenced:{after}")).as("granted by the server the address leads to now")
                .isEqualTo(after.ownerId() + ":" + after.token());
        assertThat(after.isHeld()).isTrue();
        assertThat(firstReplica.isRunning() && secondReplica.isRunning()).isTrue();
    }

    private RedisProcess replicaOf(RedisProcess primary) throws InterruptedException {
        RedisProcess replica = RedisProcess.start("--replicaof", primary.host(), Integer.toString(primary.port()));
        toClose.add(replica);
        long giveUp = System.nanoTime() + BOUND.toNanos();
        while (!String.valueOf(replica.call("INFO", "replication")).contains("master_link_status:up")) {
            assertThat(System.nanoTime() - giveUp).as("the replica syncs").isNegative();
            Thread.sleep(20);
        }
        return replica;
    }

    /** Acquires {@code name} once the client has reconnected (acquires fail fast while it is disconnected). */
    private static FencedLease awaitGrant(FencedLockClient client, String name) throws InterruptedException {
        long giveUp = System.nanoTime() + BOUND.toNanos();
        while (true) {
            try {
                FencedLease lease = client.acquire(name).block(BOUND);
                assertThat(lease).isNotNull();
                return lease;
            } catch (LockServiceException notYetConnected) {
                assertThat(System.nanoTime() - giveUp).as("reconnected in time").isNegative();
                Thread.sleep(50);
            }
        }
    }
}
