package dev.fenced.lock.internal.redis;

import dev.fenced.testservices.RedisProcess;
import dev.fenced.testservices.RedisServer;
import org.junit.jupiter.api.AfterAll;

/** The store contract and the batched calls on Redis 6.2 (the oldest server the client supports). */
class Redis6LeaseStoreIT extends RedisLeaseStoreIT {

    private static RedisProcess redis6;

    @Override
    String uriOf(RedisServer redis) {
        return redis6Uri();
    }

    private static String redis6Uri() {
        synchronized (Redis6LeaseStoreIT.class) {
            if (redis6 == null) {
                redis6 = RedisProcess.startRedis6();
            }
            return redis6.uri();
        }
    }

    /** Redis 6.2 already runs as a process of this class's own. */
    @Override
    String privateUri() {
        return redis6Uri();
    }

    @AfterAll
    static void stop() {
        if (redis6 != null) {
            redis6.close();
            redis6 = null;
        }
    }
}
