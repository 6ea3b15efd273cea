package dev.fenced.lock.internal.redis;

import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.lock.internal.LeaseStore;
import dev.fenced.lock.internal.LeaseStoreContract;
import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.LockServiceException;
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
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** The store contract on Redis with the default server-time tokens, and what those tokens add. */
@ExtendWith(RedisServerExtension.class)
class RedisLeaseStoreIT extends LeaseStoreContract {

    private RedisLeaseStore store;
    private ClientSettings settings;
    private String redisUri;
    private RedisClient adminClient;
    private RedisCommands<String, String> admin;

    /** The scheme the store under test mints tokens with. */
    TokenScheme scheme() {
        return TokenScheme.SERVER_TIME;
    }

    @BeforeEach
    void connect(RedisServer redis) {
        redisUri = redis.uri();
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

    /** Acquires and releases in flight at once go out together: one script call carries many locks. */
    @Test
    void acquiresAndReleasesInFlightTogetherShareScriptCalls() {
        int locks = 400;
        long before = scriptCalls();
        List<Boolean> released = Flux.range(0, locks)
                .flatMap(i -> store.acquire("shared-" + i, "owner-" + i, 10_000, 0)
                        .flatMap(reply -> store.release("shared-" + i, "owner-" + i, reply.token())), locks)
                .collectList()
                .block(Duration.ofSeconds(30));
        assertThat(released).hasSize(locks).containsOnly(true);
        long calls = scriptCalls() - before;
        assertThat(calls).as("script calls for %d acquires and %d releases", locks, locks).isLessThanOrEqualTo(locks / 4);
    }

    /** A call that carried many acquires fails each of them with its own lock's name. */
    @Test
    void aFailedCallFailsEachAcquireItCarriedWithItsOwnLock() {
        ClientSettings quick = ClientSettings.of("it-" + UUID.randomUUID() + ":", Duration.ofSeconds(30), null,
                Duration.ofSeconds(30), Duration.ofMillis(300), null);
        RedisLeaseStore timing = RedisLeaseStore.open(new RedisTarget.Server(RedisURI.create(redisUri)), quick, ReplicaAcks.NONE);
        try {
            timing.ping().block(Duration.ofSeconds(5));
            admin.clientPause(1_500);
            List<Throwable> failures = Flux.range(0, 50)
                    .flatMap(i -> timing.acquire("paused-" + i, "owner-" + i, 10_000, 0)
                            .then(Mono.<Throwable>empty())
                            .onErrorResume(e -> Mono.just(e)), 50)
                    .collectList()
                    .block(Duration.ofSeconds(30));
            assertThat(failures).hasSize(50).allSatisfy(e -> assertThat(e).isInstanceOf(LockServiceException.class)
                    .hasMessageContaining("no reply within the command timeout of 300 ms"));
            assertThat(failures.stream().map(e -> ((LockServiceException) e).lockName()).distinct().count())
                    .as("each failure names its own lock").isEqualTo(50);
        } finally {
            timing.close().block(Duration.ofSeconds(10));
            quick.scheduler().dispose();
        }
    }

    private long scriptCalls() {
        long calls = 0;
        for (String line : admin.info("commandstats").split("\\r?\\n")) {
            if (line.startsWith("cmdstat_evalsha:") || line.startsWith("cmdstat_eval:")) {
                String stats = line.substring(line.indexOf(':') + 1);
                calls += Long.parseLong(stats.substring("calls=".length(), stats.indexOf(',')));
            }
        }
        return calls;
    }
}
