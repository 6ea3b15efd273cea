package dev.fenced.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.LockObserver;
import dev.fenced.lock.micrometer.MicrometerLockObserver;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import io.lettuce.core.RedisURI;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.springframework.boot.data.redis.autoconfigure.DataRedisConnectionDetails;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/** The auto-configuration without a server: no connection is made before the first command. */
class FencedLockAutoConfigurationTest {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(FencedLockAutoConfiguration.class));

    @Test
    void defaultsGiveAClientAndTheLibrarysSettings() {
        // Blank, so that a FENCED_REDIS_URI in the environment (CI sets one) does not count.
        runner.withPropertyValues("fenced.redis-uri=").run(context -> {
            assertThat(context).hasSingleBean(FencedLockClient.class).hasSingleBean(FencedLockHealthIndicator.class);
            FencedProperties properties = context.getBean(FencedProperties.class);
            assertThat(properties.keyPrefix()).isEqualTo("fenced:");
            assertThat(properties.leaseTime()).isEqualTo(Duration.ofSeconds(30));
            assertThat(properties.maxWait()).isEqualTo(Duration.ofSeconds(30));
            assertThat(properties.renewalPeriod()).isNull();
            assertThat(properties.commandTimeout()).isNull();
            assertThat(context.getBean(FencedRedisConnection.class).address())
                    .isEqualTo(new RedisAddress.Server(RedisURI.create("redis://127.0.0.1:6379")));
        });
    }

    @Test
    void propertiesAreBound() {
        runner.withPropertyValues("fenced.redis-uri=redis://10.0.0.9:6380", "fenced.key-prefix=app:", "fenced.lease-time=5s",
                        "fenced.renewal-period=1s", "fenced.max-wait=250ms", "fenced.command-timeout=400ms")
                .run(context -> {
                    FencedProperties properties = context.getBean(FencedProperties.class);
                    assertThat(properties.redisUri()).isEqualTo("redis://10.0.0.9:6380");
                    assertThat(properties.keyPrefix()).isEqualTo("app:");
                    assertThat(properties.leaseTime()).isEqualTo(Duration.ofSeconds(5));
                    assertThat(properties.renewalPeriod()).isEqualTo(Duration.ofSeconds(1));
                    assertThat(properties.maxWait()).isEqualTo(Duration.ofMillis(250));
                    assertThat(properties.commandTimeout()).isEqualTo(Duration.ofMillis(400));
                });
    }

    @Test
    void theCommandTimeoutReachesTheClient() {
        // The library refuses a command timeout that is not shorter than the lease time: proof that it got there.
        runner.withPropertyValues("fenced.command-timeout=40s")
                .run(context -> assertThat(context).hasFailed().getFailure()
                        .rootCause().hasMessage("commandTimeout (PT40S) must be shorter than leaseTime (PT30S)"));
    }

    @Test
    void clusterNodesAndReplicaAcknowledgementAreBound() {
        runner.withPropertyValues("fenced.cluster-nodes=10.0.0.1:7000, redis://10.0.0.2:7000",
                        "fenced.replica-acknowledgement.replicas=1", "fenced.replica-acknowledgement.timeout=50ms")
                .run(context -> {
                    FencedProperties properties = context.getBean(FencedProperties.class);
                    assertThat(context.getBean(FencedRedisConnection.class).address()).isEqualTo(new RedisAddress.Cluster(
                            List.of(RedisURI.create("redis://10.0.0.1:7000"), RedisURI.create("redis://10.0.0.2:7000"))));
                    assertThat(properties.replicaAcknowledgement().replicas()).isEqualTo(1);
                    assertThat(properties.replicaAcknowledgement().timeout()).isEqualTo(Duration.ofMillis(50));
                    assertThat(context).hasSingleBean(FencedLockClient.class);
                });
    }

    @Test
    void withoutClusterNodesTheClientUsesOneServerAndNoReplicaAcknowledgement() {
        runner.withPropertyValues("fenced.redis-uri=").run(context -> {
            assertThat(context.getBean(FencedRedisConnection.class).address()).isInstanceOf(RedisAddress.Server.class);
            assertThat(context.getBean(FencedProperties.class).replicaAcknowledgement().replicas()).isZero();
        });
    }

    @Test
    void springDataRedisSettingsWithoutSpringBootsRedisSupportFailTheContext() {
        // Without spring-boot-data-redis nothing reads them: connecting elsewhere, or without the password, would be silent.
        runner.withClassLoader(new FilteredClassLoader(DataRedisConnectionDetails.class))
                .withPropertyValues("fenced.redis-uri=", "spring.data.redis.host=redis.internal", "spring.data.redis.password=secret")
                .run(context -> assertThat(context).hasFailed().getFailure().rootCause().hasMessage(
                        "spring.data.redis.host is set, but Fenced reads spring.data.redis.* only through Spring Boot's Redis "
                                + "support, which is not active: add org.springframework.boot:spring-boot-starter-data-redis, "
                                + "or set fenced.redis-uri"));
    }

    @Test
    void invalidSettingsFailTheContextWithTheLibrarysMessage() {
        runner.withPropertyValues("fenced.lease-time=0s")
                .run(context -> assertThat(context).hasFailed().getFailure()
                        .rootCause().hasMessage("leaseTime must be between 10 ms and 1 day, was PT0S"));
    }

    @Test
    void aRedisUriThatIsNotOneFailsTheContextNamingThePropertyButNotItsValue() {
        runner.withPropertyValues("fenced.redis-uri=redis://:secret@").run(context -> {
            Throwable failure = context.getStartupFailure();
            while (failure != null && !(failure instanceof IllegalArgumentException)) {
                failure = failure.getCause();
            }
            assertThat(failure).isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("fenced.redis-uri has a value that is not a Redis URI: Host must not be empty");
            assertThat(context.getStartupFailure()).hasStackTraceContaining("Host must not be empty")
                    .satisfies(whole -> assertThat(whole.toString() + whole.getCause()).doesNotContain("secret"));
        });
    }

    @Test
    void userBeansWin() {
        runner.withBean(FencedLockClient.class, () -> FencedLockClient.builder().redisUri("redis://127.0.0.1:1").build())
                .withBean("fencedHealthIndicator", FencedLockHealthIndicator.class,
                        () -> new FencedLockHealthIndicator(FencedLockClient.builder().redisUri("redis://127.0.0.1:2").build()))
                .run(context -> {
                    assertThat(context).hasSingleBean(FencedLockClient.class);
                    assertThat(context).hasSingleBean(FencedLockHealthIndicator.class);
                });
    }

    @Test
    void micrometerMetricsWhenARegistryIsDefined() {
        runner.withBean(SimpleMeterRegistry.class, SimpleMeterRegistry::new)
                .run(context -> assertThat(context.getBean(LockObserver.class)).isInstanceOf(MicrometerLockObserver.class));
        runner.run(context -> assertThat(context.getBean(LockObserver.class)).isSameAs(LockObserver.NONE));
    }

    @Test
    void healthIndicatorCanBeDisabled() {
        runner.withPropertyValues("management.health.fenced.enabled=false")
                .run(context -> assertThat(context).doesNotHaveBean(FencedLockHealthIndicator.class));
    }

    @Test
    void configurationMetadataIsGeneratedForIdeCompletion() throws IOException {
        try (InputStream in = getClass().getResourceAsStream("/META-INF/spring-configuration-metadata.json")) {
            assertThat(in).as("metadata generated by the configuration processor").isNotNull();
            String metadata = new String(in.readAllBytes(), StandardCharsets.UTF_8);
            assertThat(metadata).contains("\"fenced.lease-time\"", "\"fenced.key-prefix\"", "\"fenced.redis-uri\"",
                    "\"fenced.command-timeout\"");
        }
    }
}
