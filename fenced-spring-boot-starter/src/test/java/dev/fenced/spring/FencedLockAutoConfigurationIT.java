package dev.fenced.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.testservices.RedisCluster;
import dev.fenced.testservices.RedisServer;
import dev.fenced.testservices.RedisServerExtension;
import io.lettuce.core.RedisClient;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.Status;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import reactor.core.publisher.Flux;

/** The auto-configured client against a real Redis: health, and leases released on shutdown. */
@ExtendWith(RedisServerExtension.class)
class FencedLockAutoConfigurationIT {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(FencedLockAutoConfiguration.class));

    @Test
    void clusterNodesGiveAClusterClient() {
        try (RedisCluster cluster = RedisCluster.start(3)) {
            runner.withPropertyValues("fenced.cluster-nodes=" + cluster.seedUri().substring("redis://".length()))
                    .run(context -> {
                        FencedLockClient locks = context.getBean(FencedLockClient.class);
                        // A client of one node would get MOVED for the names that live on the other two.
                        List<Long> tokens = Flux.range(0, 30)
                                .flatMap(i -> locks.acquire("spread-" + i).flatMap(l -> l.release().thenReturn(l.token())))
                                .collectList()
                                .block(Duration.ofSeconds(20));
                        assertThat(tokens).hasSize(30).allMatch(token -> token > 0);
                    });
        }
    }

    @Test
    void closingTheContextReleasesHeldLeases(RedisServer redis) {
        String prefix = "starter-" + UUID.randomUUID() + ":";
        AtomicReference<FencedLease> held = new AtomicReference<>();
        runner.withPropertyValues("fenced.redis-uri=" + redis.uri(), "fenced.key-prefix=" + prefix)
                .run(context -> held.set(context.getBean(FencedLockClient.class).acquire("order:1").block(Duration.ofSeconds(10))));
        RedisClient inspector = RedisClient.create(redis.uri());
        try {
            assertThat(held.get()).isNotNull();
            assertThat(inspector.connect().sync().exists(prefix + "{order:1}")).as("released on shutdown").isZero();
            assertThat(held.get().isHeld()).isFalse();
        } finally {
            inspector.shutdown();
        }
    }

    @Test
    void healthIsUpWithRedisAndDownWithout(RedisServer redis) {
        runner.withPropertyValues("fenced.redis-uri=" + redis.uri()).run(context -> {
            Health health = context.getBean(FencedLockHealthIndicator.class).health().block(Duration.ofSeconds(10));
            assertThat(health.getStatus()).isEqualTo(Status.UP);
            assertThat(health.getDetails()).containsEntry("heldLeases", 0).containsKey("roundTripMillis");
        });
        runner.withPropertyValues("fenced.redis-uri=redis://127.0.0.1:1", "fenced.lease-time=3s").run(context -> {
            Health health = context.getBean(FencedLockHealthIndicator.class).health().block(Duration.ofSeconds(20));
            assertThat(health.getStatus()).isEqualTo(Status.DOWN);
        });
    }

    @Test
    void theHolderLabelDefaultsToTheApplicationNameHostAndPidAndCanBeSetOrSwitchedOff(RedisServer redis) {
        String prefix = "starter-label-" + UUID.randomUUID() + ":";
        String pid = "(pid " + ProcessHandle.current().pid() + ")";
        ApplicationContextRunner onRedis = runner.withPropertyValues("fenced.redis-uri=" + redis.uri(),
                "fenced.key-prefix=" + prefix, "management.endpoints.web.exposure.include=fencedlocks");
        onRedis.withPropertyValues("spring.application.name=orders").run(context -> {
            FencedLockClient locks = context.getBean(FencedLockClient.class);
            FencedLease lease = locks.acquire("by-default").block(Duration.ofSeconds(10));
            FencedLocksEndpoint.Lock lock = context.getBean(FencedLocksEndpoint.class).lock("by-default")
                    .block(Duration.ofSeconds(10));
            assertThat(lock.token()).isEqualTo(lease.token());
            assertThat(lock.holderLabel()).startsWith("orders@").endsWith(" " + pid);
        });
        onRedis.withPropertyValues("fenced.holder-label=orders blue/green slot 2").run(context -> {
            FencedLease lease = context.getBean(FencedLockClient.class).acquire("set").block(Duration.ofSeconds(10));
            assertThat(context.getBean(FencedLocksEndpoint.class).lock("set").block(Duration.ofSeconds(10)).holderLabel())
                    .isEqualTo("orders blue/green slot 2");
            assertThat(lease.isHeld()).isTrue(); // and kept reachable until read
        });
        onRedis.withPropertyValues("fenced.holder-label-enabled=false").run(context -> {
            FencedLease lease = context.getBean(FencedLockClient.class).acquire("off").block(Duration.ofSeconds(10));
            assertThat(context.getBean(FencedLocksEndpoint.class).lock("off").block(Duration.ofSeconds(10)).holderLabel())
                    .isNull();
            assertThat(lease.isHeld()).isTrue(); // and kept reachable until read
        });
        onRedis.withPropertyValues("fenced.holder-label=" + "x".repeat(201)).run(context -> assertThat(context)
                .hasFailed().getFailure().rootCause()
                .hasMessage("holderLabel must be at most 200 characters, was 201"));
    }
}
