package dev.fenced.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.fenced.testservices.RedisCluster;
import dev.fenced.testservices.RedisProcess;
import io.lettuce.core.cluster.SlotHash;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import reactor.core.publisher.Flux;

/**
 * The lock client on a real three-primary Redis 7 Cluster started on loopback ports: locks spread over every
 * node, waiting through sharded pub/sub, renewals batched per node, a reshard under held leases, and replica
 * acknowledgement routed to the lock's node.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RedisClusterIT {

    private static final Duration BOUND = Duration.ofSeconds(20);

    private RedisCluster cluster;

    private String prefix;
    private final List<FencedLockClient> clients = new ArrayList<>();

    @BeforeAll
    void startCluster() {
        cluster = newCluster();
    }

    /** The cluster under test: Redis 7 from the PATH. */
    RedisCluster newCluster() {
        return RedisCluster.start(3);
    }

    /** Whether the waiter of {@code channel} is subscribed where releases will be published. */
    boolean subscribed(String channel) {
        RedisProcess owner = cluster.nodes().get(cluster.ownerOf(cluster.slotOf(channel)));
        return String.valueOf(owner.call("PUBSUB", "SHARDNUMSUB", channel)).equals("[" + channel + ", 1]");
    }

    /** The most script calls that renewing 300 leases for three periods may take: a few per node and period. */
    long maxRenewalCalls() {
        return 60;
    }

    RedisCluster cluster() {
        return cluster;
    }

    @AfterAll
    void stopCluster() {
        cluster.close();
    }

    @BeforeEach
    void setUp() {
        prefix = "cl-" + UUID.randomUUID().toString().substring(0, 8) + ":";
    }

    @AfterEach
    void tearDown() {
        clients.forEach(FencedLockClient::close);
    }

    private FencedLockClient client(Duration leaseTime) {
        FencedLockClient client = FencedLockClient.builder()
                .redisCluster(cluster.seedUri())
                .keyPrefix(prefix)
                .leaseTime(leaseTime)
                .maxWait(BOUND)
                .build();
        clients.add(client);
        return client;
    }

    @Test
    void aThousandNamesSpreadOverEveryPrimaryWithTokensIncreasingPerName() {
        FencedLockClient locks = client(Duration.ofSeconds(30));
        Map<String, Long> first = tokens(locks);
        Map<String, Long> second = tokens(locks);

        assertThat(second).hasSize(1000);
        second.forEach((name, token) -> assertThat(token).as(name).isGreaterThan(first.get(name)));
        for (RedisProcess node : cluster.nodes()) {
            // Only the token counters remain after release, spread over every node.
            assertThat((Long) node.call("DBSIZE")).as("keys on node " + node.port()).isPositive();
        }
    }

    private static Map<String, Long> tokens(FencedLockClient locks) {
        return Flux.range(0, 1000)
                .flatMap(i -> locks.acquire("spread-" + i)
                        .flatMap(lease -> lease.release().thenReturn(Map.entry(lease.name(), lease.token()))), 64)
                .collectMap(Map.Entry::getKey, Map.Entry::getValue)
                .block(BOUND);
    }

    @Test
    void aWaiterIsWokenByTheReleaseNotification() throws Exception {
        FencedLockClient holder = client(Duration.ofSeconds(60));
        FencedLockClient waiter = client(Duration.ofSeconds(60));
        FencedLease held = holder.acquire("wake").block(BOUND);
        String channel = prefix + "{wake}:released";

        CompletableFuture<FencedLease> next = waiter.acquire("wake").toFuture();
        await("the waiter to subscribe to the lock's release channel", () -> subscribed(channel));
        held.release().block(BOUND);

        // The holder's lease had 60 s to run and the wait is bounded at 20 s: only the notification can wake it.
        FencedLease woken = next.get(BOUND.toSeconds(), TimeUnit.SECONDS);
        assertThat(woken.token()).isGreaterThan(held.token());
        woken.release().block(BOUND);
    }

    @Test
    void aClientThatCannotReadInfoAgreesWithTheOthersOnHowReleasesAreNotified() throws Exception {
        // A managed cluster may refuse INFO to the application's user; the holder's client reads it, the waiter's
        // cannot. Both must use the channel kind the server has, or the waiter never hears the release.
        for (RedisProcess node : cluster.nodes()) {
            node.call("ACL", "SETUSER", "noinfo", "on", "nopass", "~*", "resetchannels", "&*", "+@all", "-info");
        }
        FencedLockClient holder = client(Duration.ofSeconds(60));
        FencedLockClient waiter = FencedLockClient.builder()
                .redisCluster(cluster.seedUri().replace("redis://", "redis://noinfo:any@"))
                .keyPrefix(prefix).leaseTime(Duration.ofSeconds(60)).maxWait(BOUND).build();
        clients.add(waiter);
        FencedLease held = holder.acquire("agree").block(BOUND);
        String channel = prefix + "{agree}:released";

        CompletableFuture<FencedLease> next = waiter.acquire("agree").toFuture();
        await("the waiter to subscribe to the lock's release channel", () -> subscribed(channel));
        held.release().block(BOUND);

        // The holder's lease had 60 s to run and the wait is bounded at 20 s: only the notification can wake it.
        FencedLease woken = next.get(BOUND.toSeconds(), TimeUnit.SECONDS);
        assertThat(woken.token()).isGreaterThan(held.token());
        woken.release().block(BOUND);
    }

    @Test
    void aWaiterWhoseChannelMovesWithItsSlotIsStillWoken() throws Exception {
        FencedLockClient holder = client(Duration.ofSeconds(60));
        FencedLockClient waiter = client(Duration.ofSeconds(60));
        FencedLease held = holder.acquire("moving").block(BOUND);
        String channel = prefix + "{moving}:released";
        CompletableFuture<FencedLease> next = waiter.acquire("moving").toFuture();
        await("the waiter to subscribe", () -> subscribed(channel));
        int slot = cluster.slotOf(channel);

        cluster.moveSlot(slot, (cluster.ownerOf(slot) + 1) % cluster.nodes().size());
        await("the waiter to subscribe where the slot went", () -> subscribed(channel));
        held.release().block(BOUND);

        FencedLease woken = next.get(BOUND.toSeconds(), TimeUnit.SECONDS);
        assertThat(woken.token()).isGreaterThan(held.token());
        woken.release().block(BOUND);
    }

    @Test
    void scriptsAreLoadedAgainAfterEveryNodeForgotThem() throws Exception {
        FencedLockClient locks = client(Duration.ofSeconds(6));
        List<FencedLease> before = Flux.range(0, 30).flatMap(i -> locks.acquire("flush-" + i)).collectList().block(BOUND);

        cluster.nodes().forEach(node -> node.call("SCRIPT", "FLUSH"));
        // Past a renewal period (two seconds): the renewal script is sent again.
        Thread.sleep(3_000);

        assertThat(before.stream().filter(lease -> !lease.isHeld()).map(lease -> lease.lost().block(BOUND).getMessage()))
                .as("leases lost").isEmpty();
        List<Long> after = Flux.fromIterable(before)
                .flatMap(lease -> lease.release().then(locks.acquire(lease.name())))
                .flatMap(lease -> lease.release().thenReturn(lease.token()))
                .collectList()
                .block(BOUND);
        assertThat(after).hasSize(30);
    }

    @Test
    void renewalsAreBatchedPerNode() throws Exception {
        FencedLockClient locks = client(Duration.ofSeconds(6));
        List<FencedLease> leases = Flux.range(0, 300).flatMap(i -> locks.acquire("batch-" + i), 64).collectList().block(BOUND);
        cluster.nodes().forEach(node -> node.call("CONFIG", "RESETSTAT"));

        // Three renewal periods (two seconds each at a six-second lease); without renewals every lease would be lost.
        Thread.sleep(7_000);

        assertThat(leases).allMatch(FencedLease::isHeld);
        long scriptCalls = 0;
        for (RedisProcess node : cluster.nodes()) {
            scriptCalls += calls(node, "evalsha") + calls(node, "eval");
        }
        // One call per lease or per slot would be about 900.
        assertThat(scriptCalls).isLessThanOrEqualTo(maxRenewalCalls());
    }

    private static long calls(RedisProcess node, String command) {
        for (String line : String.valueOf(node.call("INFO", "commandstats")).split("\r?\n")) {
            if (line.startsWith("cmdstat_" + command + ":calls=")) {
                return Long.parseLong(line.substring(line.indexOf('=') + 1, line.indexOf(',')));
            }
        }
        return 0;
    }

    @Test
    void aReshardUnderHeldLeasesIsSurvivedOrReported() throws Exception {
        FencedLockClient locks = client(Duration.ofSeconds(3));
        FencedLockClient rival = client(Duration.ofSeconds(3));
        List<String> sameSlot = namesInOneSlot(4);
        int slot = SlotHash.getSlot(prefix + "{" + sameSlot.get(0) + "}");
        List<FencedLease> moved = new ArrayList<>();
        for (String name : sameSlot) {
            moved.add(locks.acquire(name).block(BOUND));
        }
        List<FencedLease> others = Flux.range(0, 50).flatMap(i -> locks.acquire("other-" + i)).collectList().block(BOUND);
        int target = (cluster.ownerOf(slot) + 1) % cluster.nodes().size();

        // Each lock's keys share its slot: the lock, its counter and its holder label.
        assertThat(cluster.moveSlot(slot, target)).as("keys moved: locks, counters and holder labels")
                .isEqualTo(3 * sameSlot.size());
        // Three lease times: a lease that was not renewed on the new owner must have been reported lost by now.
        Thread.sleep(9_000);

        RedisProcess newOwner = cluster.nodes().get(target);
        for (FencedLease lease : moved) {
            if (lease.isHeld()) {
                String key = prefix + "{" + lease.name() + "}";
                assertThat(newOwner.call("GET", key)).as(lease.name() + " held, so renewed on the new owner")
                        .isEqualTo(lease.ownerId() + ":" + lease.token());
                assertThat((Long) newOwner.call("PTTL", key)).isPositive();
                assertThat(rival.tryAcquire(lease.name()).blockOptional(BOUND)).as("excluded: " + lease.name()).isEmpty();
            } else {
                assertThat(lease.lost().block(BOUND)).isNotNull();
            }
        }
        assertThat(others).allMatch(FencedLease::isHeld);
        // The moved leases are renewed, not lost: the client follows the slot.
        assertThat(moved).allMatch(FencedLease::isHeld);
    }

    @Test
    void replicaAcknowledgementRunsOnTheLocksNodeAndFailsWithoutReplicas() {
        FencedLockClient acknowledged = FencedLockClient.builder()
                .redisCluster(cluster.seedUri())
                .keyPrefix(prefix)
                .replicaAcknowledgement(1, Duration.ofMillis(100))
                .build();
        clients.add(acknowledged);
        FencedLockClient other = client(Duration.ofSeconds(30));

        for (int i = 0; i < 10; i++) {
            String name = "acknowledged-" + i;
            // A script sent to the wrong node would fail with MOVED instead.
            assertThatThrownBy(() -> acknowledged.acquire(name).block(BOUND))
                    .isInstanceOfSatisfying(ReplicaAcknowledgementException.class, e -> assertThat(e.acknowledged()).isZero());
            assertThat(other.tryAcquire(name).blockOptional(BOUND)).as("released again: " + name).isPresent();
        }
    }

    /** Lock names whose keys share one hash slot (found by search, since names may not contain braces). */
    private List<String> namesInOneSlot(int count) {
        Map<Integer, List<String>> bySlot = new HashMap<>();
        for (int i = 0; ; i++) {
            String name = "slot-" + i;
            List<String> names = bySlot.computeIfAbsent(SlotHash.getSlot(prefix + "{" + name + "}"), s -> new ArrayList<>());
            names.add(name);
            if (names.size() == count) {
                return names;
            }
        }
    }

    private static void await(String what, BooleanSupplier condition) throws InterruptedException {
        long giveUp = System.nanoTime() + BOUND.toNanos();
        while (!condition.getAsBoolean()) {
            assertThat(System.nanoTime() - giveUp).as("waiting for: " + what).isNegative();
            Thread.sleep(10);
        }
    }
}
