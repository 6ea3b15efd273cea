package dev.fenced.lock.internal.redis;

import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.lock.internal.LeaseStore;
import dev.fenced.lock.internal.LeaseStoreContract;
import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.TokenScheme;
import dev.fenced.lock.internal.LeaseStore.AcquireReply;
import dev.fenced.testservices.RedisServer;
import dev.fenced.testservices.RedisServerExtension;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.sync.RedisCommands;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The store contract on Redis with the default server-time tokens, and what those tokens add. */
@ExtendWith(RedisServerExtension.class)
class RedisLeaseStoreIT extends LeaseStoreContract {

    private RedisLeaseStore store;
    private ClientSettings settings;
    private RedisClient adminClient;
    private RedisCommands<String, String> admin;

    /** The scheme the store under test mints tokens with. */
    TokenScheme scheme() {
        return TokenScheme.SERVER_TIME;
    }

    @BeforeEach
    void connect(RedisServer redis) {
        settings = ClientSettings.of("it-" + UUID.randomUUID() + ":", Duration.ofSeconds(30), null, Duration.ofSeconds(30), null, null)
                .withTokenScheme(scheme());
        store = RedisLeaseStore.open(new RedisTarget.Server(RedisURI.create(redis.uri())), settings, ReplicaAcks.NONE);
        adminClient = RedisClient.create(redis.uri());
        admin = adminClient.connect().sync();
    }

    @AfterEach
    void close() {
        store.close().block(Duration.ofSeconds(10));
        settings.scheduler().dispose();
        adminClient.shutdown();
    }

    @Override
    protected LeaseStore store() {
        return store;
    }

    @Override
    protected boolean consecutiveTokens() {
        return scheme() == TokenScheme.COUNTER;
    }

    @Override
    protected void elapse(Duration duration) {
        sleep(duration);
    }

    private AcquireReply grantAndRelease(String name, String owner) {
        AcquireReply reply = store.acquire(name, owner, 10_000, 0).block(Duration.ofSeconds(5));
        assertThat(reply).isNotNull();
        assertThat(reply.acquired()).isTrue();
        assertThat(store.release(name, owner, reply.token()).block(Duration.ofSeconds(5))).isTrue();
        return reply;
    }

    private long serverMicros() {
        List<String> time = admin.time();
        return Long.parseLong(time.get(0)) * 1_000_000L + Long.parseLong(time.get(1));
    }

    @Test
    void aTokenIsAtLeastTheServerTimeInMicroseconds() {
        if (consecutiveTokens()) {
            assertThat(grantAndRelease("time-" + UUID.randomUUID(), "a").token()).isEqualTo(1);
            return;
        }
        long before = serverMicros();
        long token = grantAndRelease("time-" + UUID.randomUUID(), "a").token();
        assertThat(token).isBetween(before, serverMicros());
    }

    @Test
    void tokensStayAboveEveryEarlierOneAfterTheCounterFallsBackBySeveralGrants() {
        String name = "fallback-" + UUID.randomUUID();
        String counter = settings.keyPrefix() + "{" + name + "}:fence";
        long highest = 0;
        for (int i = 0; i < 5; i++) {
            highest = grantAndRelease(name, "before-" + i).token();
        }
        // A failover to a replica that missed the last three increments: the counter falls back.
        admin.set(counter, Long.toString(highest - 3));
        AcquireReply next = grantAndRelease(name, "after-0");
        if (consecutiveTokens()) {
            assertThat(next.token()).as("the window of counter tokens").isEqualTo(highest - 2);
        } else {
            assertThat(next.token()).isGreaterThan(highest);
        }
        // A restart without persistence: the counter is gone.
        admin.del(counter);
        AcquireReply afterRestart = grantAndRelease(name, "after-1");
        if (consecutiveTokens()) {
            assertThat(afterRestart.token()).isEqualTo(1);
        } else {
            assertThat(afterRestart.token()).isGreaterThan(next.token());
        }
    }

    @Test
    void theCounterKeepsTheLastTokenExactly() {
        String name = "exact-" + UUID.randomUUID();
        long token = grantAndRelease(name, "a").token();
        assertThat(admin.get(settings.keyPrefix() + "{" + name + "}:fence")).isEqualTo(Long.toString(token));
    }
}
