package dev.fenced.integration;

import dev.fenced.lock.FencedLockClient;
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
}
