package dev.fenced.lock.internal.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.lock.internal.LeaseStore;
import dev.fenced.testservices.RedisProcess;
import io.lettuce.core.RedisURI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * A server behind one address that refuses calls whose keys span hash slots, as proxies and sharded services do
 * (here a one-node Redis Cluster that serves every slot, addressed as one server): batched calls fall back to one
 * lock a call, and every acquire and release still answers.
 */
class CrossSlotServerIT {

    @Test
    void aServerThatRefusesCrossSlotCallsGetsEachLockAlone() throws InterruptedException {
        try (RedisProcess node = RedisProcess.start("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")) {
            node.call("CLUSTER", "ADDSLOTSRANGE", "0", "16383");
            for (int i = 0; i < 100 && !String.valueOf(node.call("CLUSTER", "INFO")).contains("cluster_state:ok"); i++) {
                Thread.sleep(100);
            }
            assertThat(String.valueOf(node.call("CLUSTER", "INFO"))).contains("cluster_state:ok");
            ClientSettings settings = ClientSettings.of("it-" + UUID.randomUUID() + ":", Duration.ofSeconds(30), null,
                    Duration.ofSeconds(30), null, null);
            RedisLeaseStore store = RedisLeaseStore.open(new RedisTarget.Server(RedisURI.create(node.uri())), settings,
                    ReplicaAcks.NONE);
            try {
                RedisLeaseStoreIT.acquireAndReleaseAtOnce(store, "slot-", 200);
                // The batch calls too: refused as one call, each lock alone, nothing ran twice.
                List<LeaseStore.AcquireRequest> acquires = new ArrayList<>();
                List<LeaseStore.ReleaseRequest> releases = new ArrayList<>();
                for (int i = 0; i < 8; i++) {
                    acquires.add(new LeaseStore.AcquireRequest("batch-" + i, "owner-" + i, 30_000, 0));
                    releases.add(new LeaseStore.ReleaseRequest("batch-" + i, "owner-" + i, null));
                }
                List<LeaseStore.AcquireResult> granted = store.acquireAll(acquires).block(Duration.ofSeconds(10));
                assertThat(granted).hasSize(8).allSatisfy(r -> {
                    assertThat(r.failure()).isNull();
                    assertThat(r.reply().acquired()).isTrue();
                });
                // A store that has not been refused yet: its releaseAll is refused as one call, then each lock alone.
                RedisLeaseStore fresh = RedisLeaseStore.open(new RedisTarget.Server(RedisURI.create(node.uri())), settings,
                        ReplicaAcks.NONE);
                try {
                    List<LeaseStore.ReleaseResult> released = fresh.releaseAll(releases).block(Duration.ofSeconds(10));
                    assertThat(released).hasSize(8).allSatisfy(r -> {
                        assertThat(r.failure()).isNull();
                        assertThat(r.released()).isTrue();
                    });
                } finally {
                    fresh.close().block(Duration.ofSeconds(10));
                }
            } finally {
                store.close().block(Duration.ofSeconds(10));
                settings.scheduler().dispose();
            }
        }
    }
}
