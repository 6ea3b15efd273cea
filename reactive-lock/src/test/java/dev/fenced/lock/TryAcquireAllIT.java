package dev.fenced.lock;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.testservices.RedisProcess;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.sync.RedisCommands;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.function.BooleanSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;

/**
 * Batches against a Redis of their own (so that its command statistics count this test's calls alone), through the
 * public API: one acquire-script call for the batch, each lock's key holding its own lease, busy locks reported, and
 * nothing left behind by a cancelled batch.
 */
class TryAcquireAllIT {

    private static final Duration BOUND = Duration.ofSeconds(20);

    private RedisProcess redis;
    private RedisClient inspectorClient;
    private RedisCommands<String, String> inspector;
    private FencedLockClient client;
    private FencedLockClient other;
    private final String prefix = "batch-" + UUID.randomUUID() + ":";

    @BeforeEach
    void setUp() {
        redis = RedisProcess.start();
        inspectorClient = RedisClient.create(redis.uri());
        inspector = inspectorClient.connect().sync();
        client = FencedLockClient.builder().redisUri(redis.uri()).keyPrefix(prefix).build();
        other = FencedLockClient.builder().redisUri(redis.uri()).keyPrefix(prefix).build();
    }

    @AfterEach
    void tearDown() {
        client.close();
        other.close();
        inspectorClient.shutdown();
        redis.close();
    }

    private static List<String> names(String stem, int count) {
        return IntStream.range(0, count).mapToObj(i -> stem + ":" + i).toList();
    }

    /** Calls of scripts (EVALSHA and EVAL) since the last reset. */
    private long scriptCalls() {
        String stats = inspector.info("commandstats");
        long calls = 0;
        Matcher m = Pattern.compile("cmdstat_(?:evalsha|eval):calls=(\\d+)").matcher(stats);
        while (m.find()) {
            calls += Long.parseLong(m.group(1));
        }
        return calls;
    }

    private static void await(String what, BooleanSupplier condition) throws InterruptedException {
        long giveUp = System.nanoTime() + BOUND.toNanos();
        while (!condition.getAsBoolean()) {
            assertThat(System.nanoTime() - giveUp).as("waiting for: " + what).isNegative();
            Thread.sleep(10);
        }
    }

    @Test
    void aBatchOfSixtyFourLocksIsOneScriptCallAndEachKeyHoldsItsOwnLease() {
        // The first calls load the scripts (NOSCRIPT, then EVAL) and open the connection.
        client.tryAcquireAll(names("warm", 2)).block(BOUND).releaseAll().block(BOUND);
        List<String> names = names("item", 64);
        FencedLease taken = other.tryAcquire("item:5").block(BOUND);
        inspector.configResetstat();
        FencedLeaseBatch batch = client.tryAcquireAll(names).block(BOUND);
        assertThat(scriptCalls()).as("script calls for the batch's acquires").isEqualTo(1);
        assertThat(batch.busy()).containsExactly("item:5");
        assertThat(batch.leases()).hasSize(63);
        for (FencedLease lease : batch.leases()) {
            assertThat(inspector.get(prefix + "{" + lease.name() + "}")).isEqualTo(lease.ownerId() + ":" + lease.token());
        }
        assertThat(client.heldLeases()).isEqualTo(63);
        inspector.configResetstat();
        Map<String, ReleaseOutcome> released = batch.releaseAll().block(BOUND);
        assertThat(scriptCalls()).as("script calls for the batch's releases").isEqualTo(1);
        assertThat(released).hasSize(63).containsOnlyKeys(batch.leases().stream().map(FencedLease::name).toList());
        assertThat(released.values()).containsOnly(ReleaseOutcome.RELEASED);
        for (FencedLease lease : batch.leases()) {
            assertThat(inspector.exists(prefix + "{" + lease.name() + "}")).as(lease.name()).isZero();
        }
        assertThat(client.heldLeases()).isZero();
        assertThat(inspector.get(prefix + "{item:5}")).isEqualTo(taken.ownerId() + ":" + taken.token());
    }

    @Test
    void aBatchCancelledAsItIsSentLeavesNoLockBehind() throws InterruptedException {
        client.ping().block(BOUND);
        List<String> names = names("cancelled", 32);
        for (int round = 0; round < 20; round++) {
            // A reply may beat the cancel: a batch delivered before it is the subscriber's, which releases it.
            List<FencedLeaseBatch> delivered = new java.util.concurrent.CopyOnWriteArrayList<>();
            Disposable subscription = client.tryAcquireAll(names).subscribe(delivered::add);
            subscription.dispose();
            delivered.forEach(batch -> batch.releaseAll().block(BOUND));
            await("no lease held after round " + round, () -> client.heldLeases() == 0);
            await("no lock key left after round " + round, () -> names.stream()
                    .noneMatch(name -> inspector.exists(prefix + "{" + name + "}") > 0));
        }
        // The locks are free for the next holder at once.
        FencedLeaseBatch next = other.tryAcquireAll(names).block(BOUND);
        assertThat(next.busy()).isEmpty();
        next.releaseAll().block(BOUND);
    }

    @Test
    void aTokenOfABatchIsAboveEveryEarlierGrantOfItsLock() {
        FencedLease single = client.tryAcquire("t:1").block(BOUND);
        single.release().block(BOUND);
        FencedLeaseBatch batch = client.tryAcquireAll(List.of("t:1", "t:2")).block(BOUND);
        assertThat(batch.lease("t:1").token()).isGreaterThan(single.token());
        batch.releaseAll().block(BOUND);
        FencedLease after = client.tryAcquire("t:2").block(BOUND);
        assertThat(after.token()).isGreaterThan(batch.lease("t:2").token());
        after.release().block(BOUND);
    }

    @Test
    void aLockTheScriptFailsOnFailsTheBatchAndTheOthersAreReleased() throws InterruptedException {
        // A key of another type under one lock's name: the script answers an error for that lock alone.
        inspector.hset(prefix + "{bad}", "field", "value");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> client.tryAcquireAll(List.of("ok:1", "bad", "ok:2")).block(BOUND))
                .isInstanceOf(LockServiceException.class)
                .hasMessageContaining("'bad'");
        await("the granted locks released", () -> inspector.exists(prefix + "{ok:1}", prefix + "{ok:2}") == 0);
        assertThat(client.heldLeases()).isZero();
    }

    @Test
    void aReleaseTheScriptFailsOnFailsReleaseAllOnceTheOthersAreReleasedInTheSameCall() {
        // Loads the scripts (NOSCRIPT, then EVAL).
        client.tryAcquireAll(names("warm", 2)).block(BOUND).releaseAll().block(BOUND);
        FencedLeaseBatch batch = client.tryAcquireAll(List.of("r:1", "r:bad", "r:3")).block(BOUND);
        assertThat(batch.busy()).isEmpty();
        // The lock key of one lease replaced by a key of another type: the release script fails for it alone.
        inspector.del(prefix + "{r:bad}");
        inspector.hset(prefix + "{r:bad}", "field", "value");
        inspector.configResetstat();
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> batch.releaseAll().block(BOUND))
                .isInstanceOf(LockServiceException.class)
                .hasMessageContaining("'r:bad'");
        assertThat(scriptCalls()).as("script calls for the batch's releases").isEqualTo(1);
        assertThat(inspector.exists(prefix + "{r:1}", prefix + "{r:3}")).as("the other locks released").isZero();
        assertThat(batch.lease("r:1").release().block(BOUND)).isEqualTo(ReleaseOutcome.RELEASED);
        // The failed release may be retried: its lock no longer holds the lease.
        inspector.del(prefix + "{r:bad}");
        assertThat(batch.lease("r:bad").release().block(BOUND)).isEqualTo(ReleaseOutcome.NOT_HELD);
        assertThat(client.heldLeases()).isZero();
    }

    @Test
    void aNameHeldInScopeByAClientOfAnotherPrefixIsAnotherLockAndIsGranted() {
        try (FencedLockClient elsewhere = FencedLockClient.builder().redisUri(redis.uri()).keyPrefix("elsewhere-" + prefix)
                .build()) {
            // As the single attempt: a lease of another prefix in the Context is a different lock, neither reused nor refused.
            List<String> granted = elsewhere.withLease("x", outer -> client.tryAcquireAll(List.of("x", "y"))
                            .flatMap(batch -> batch.releaseAll().thenReturn(batch.leases().stream().map(FencedLease::name).toList())))
                    .blockLast(BOUND);
            assertThat(granted).containsExactly("x", "y");
            // The batch's own client, asked inside its own scope, still refuses the name.
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> client.withLease("x", outer -> client.tryAcquireAll(List.of("x")))
                            .blockLast(BOUND))
                    .isExactlyInstanceOf(IllegalStateException.class)
                    .hasMessageStartingWith("Lock 'x' is already held by an enclosing scope");
        }
        assertThat(client.heldLeases()).isZero();
    }
}
