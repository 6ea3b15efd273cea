package dev.fenced.lock.internal.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.testservices.RedisProcess;
import io.lettuce.core.RedisURI;
import java.time.Duration;
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
            } finally {
                store.close().block(Duration.ofSeconds(10));
                settings.scheduler().dispose();
            }
        }
    }
}
