package dev.fenced.integration;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import dev.fenced.testservices.RedisServer;
import dev.fenced.testservices.RedisServerExtension;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.ExtendWith;

/** The Spring Integration lock contract on Redis. */
@ExtendWith(RedisServerExtension.class)
final class FencedLockRegistryRedisIT extends LockRegistryContract {

    private RedisServer redis;

    @BeforeEach
    void server(RedisServer redis) {
        this.redis = redis;
    }

    @Override
    FencedLockClient newClient(String keyPrefix) {
        return FencedLockClient.builder().redisUri(redis.uri()).keyPrefix(keyPrefix).build();
    }

    @Override
    void freeInStoreOnly(FencedLease lease) {
        // The lease's lock id is its Redis key.
        RedisClient lettuce = RedisClient.create(redis.uri());
        try (StatefulRedisConnection<String, String> connection = lettuce.connect()) {
            assertThat(connection.sync().del(lease.lockId())).isEqualTo(1L);
        } finally {
            lettuce.shutdown();
        }
    }
}
