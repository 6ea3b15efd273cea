package dev.fenced.lock.internal;

import dev.fenced.testservices.RedisServer;
import dev.fenced.testservices.RedisServerExtension;
import io.lettuce.core.RedisURI;
import java.time.Duration;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.ExtendWith;

@ExtendWith(RedisServerExtension.class)
class RedisLeaseStoreIT extends LeaseStoreContract {

    private RedisLeaseStore store;
    private ClientSettings settings;

    @BeforeEach
    void connect(RedisServer redis) {
        settings = ClientSettings.of("it-" + UUID.randomUUID() + ":", Duration.ofSeconds(30), null, Duration.ofSeconds(30), null, null);
        store = RedisLeaseStore.owned(RedisURI.create(redis.uri()), settings);
    }

    @AfterEach
    void close() {
        store.close().block(Duration.ofSeconds(10));
        settings.scheduler().dispose();
    }

    @Override
    protected LeaseStore store() {
        return store;
    }

    @Override
    protected void elapse(Duration duration) {
        try {
            Thread.sleep(duration.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }
}
