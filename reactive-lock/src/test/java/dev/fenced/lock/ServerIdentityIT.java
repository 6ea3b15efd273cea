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
