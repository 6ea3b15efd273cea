package dev.fenced.testservices;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class RedisTopologiesIT {

    @Test
    void aProcessSyncsReplicasWithoutRedis7sFiveSecondDisklessDelay() {
        try (RedisProcess redis = RedisProcess.start()) {
            assertThat(redis.call("CONFIG", "GET", "repl-diskless-sync-delay"))
                    .isEqualTo(java.util.List.of("repl-diskless-sync-delay", "0"));
        }
    }

    @Test
    void clusterFormsAndMovesASlotWithItsKeys() {
        try (RedisCluster cluster = RedisCluster.start(3)) {
            assertThat(cluster.nodes()).hasSize(3);
            String key = "topology:{moved}";
            int slot = cluster.slotOf(key);
            int owner = cluster.ownerOf(slot);
            cluster.nodes().get(owner).call("SET", key, "v");
            int target = (owner + 1) % 3;

            assertThat(cluster.moveSlot(slot, target)).isEqualTo(1);

            assertThat(cluster.ownerOf(slot)).isEqualTo(target);
            assertThat(cluster.nodes().get(target).call("GET", key)).isEqualTo("v");
        }
    }

    @Test
    void sentinelsPromoteTheReplicaWhenThePrimaryDies() {
        try (RedisSentinels group = RedisSentinels.start()) {
            assertThat(group.currentPrimaryPort()).isEqualTo(group.primary().port());
            group.primary().call("SET", "topology:replicated", "v");
            group.primary().call("WAIT", "1", "5000");

            group.killPrimary();
            group.awaitFailover(Duration.ofSeconds(30));

            assertThat(group.currentPrimaryPort()).isEqualTo(group.replica().port());
            assertThat(group.replica().call("GET", "topology:replicated")).isEqualTo("v");
        }
    }
}
