package dev.fenced.lock;

import dev.fenced.testservices.RedisCluster;
import dev.fenced.testservices.RedisProcess;

/**
 * The cluster tests on Redis 6.2 (the embedded-redis binary): no sharded pub/sub, so waiters subscribe
 * with {@code SUBSCRIBE} and releases {@code PUBLISH} to the whole cluster; no cross-slot script flag, so
 * renewals are batched per slot.
 */
class Redis6ClusterIT extends RedisClusterIT {

    @Override
    RedisCluster newCluster() {
        return RedisCluster.startRedis6(3);
    }

    @Override
    boolean subscribed(String channel) {
        long subscribers = 0;
        for (RedisProcess node : cluster().nodes()) {
            String reply = String.valueOf(node.call("PUBSUB", "NUMSUB", channel));
            subscribers += reply.endsWith(", 1]") ? 1 : 0;
        }
        return subscribers == 1;
    }

    @Override
    long maxRenewalCalls() {
        // One call per slot and period: 300 leases over about 300 slots, for three or four periods.
        return 4 * 300;
    }
}
