package dev.fenced.spring;

import static org.assertj.core.api.Assertions.assertThat;

import io.lettuce.core.RedisURI;
import io.lettuce.core.resource.ClientResources;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.data.redis.autoconfigure.DataRedisAutoConfiguration;
import org.springframework.boot.data.redis.autoconfigure.DataRedisConnectionDetails;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/** Spring Boot's Redis settings reach the client whole, without a server: what the URIs carry. */
class SpringDataRedisAddressTest {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(DataRedisAutoConfiguration.class, FencedLockAutoConfiguration.class))
            // Blank, so that a FENCED_REDIS_URI in the environment (CI sets one) does not count.
            .withPropertyValues("fenced.redis-uri=");

    @Test
    void standaloneSettingsKeepCredentialsDatabaseTlsAndClientName() {
        runner.withPropertyValues("spring.data.redis.host=redis.internal", "spring.data.redis.port=6390",
                        "spring.data.redis.username=app", "spring.data.redis.password=s3cret", "spring.data.redis.database=4",
                        "spring.data.redis.ssl.enabled=true", "spring.data.redis.client-name=orders")
                .run(context -> {
                    RedisURI uri = server(context.getBean(FencedRedisConnection.class));
                    assertThat(uri.getHost()).isEqualTo("redis.internal");
                    assertThat(uri.getPort()).isEqualTo(6390);
                    assertThat(uri.getUsername()).isEqualTo("app");
                    assertThat(new String(uri.getPassword())).isEqualTo("s3cret");
                    assertThat(uri.getDatabase()).isEqualTo(4);
                    assertThat(uri.isSsl()).isTrue();
                    assertThat(uri.getClientName()).isEqualTo("orders");
                });
    }

    @Test
    void aUrlKeepsItsCredentialsAndTls() {
        runner.withPropertyValues("spring.data.redis.url=rediss://app:s3cret@redis.internal:6391/2")
                .run(context -> {
                    RedisURI uri = server(context.getBean(FencedRedisConnection.class));
                    assertThat(uri.getHost()).isEqualTo("redis.internal");
                    assertThat(uri.getPort()).isEqualTo(6391);
                    assertThat(uri.getUsername()).isEqualTo("app");
                    assertThat(new String(uri.getPassword())).isEqualTo("s3cret");
                    assertThat(uri.getDatabase()).isEqualTo(2);
                    assertThat(uri.isSsl()).isTrue();
                });
    }

    @Test
    void sentinelSettingsGiveASentinelUriWithBothSetsOfCredentials() {
        runner.withPropertyValues("spring.data.redis.sentinel.master=orders-primary",
                        "spring.data.redis.sentinel.nodes=10.0.0.1:26379,10.0.0.2:26380",
                        "spring.data.redis.sentinel.password=sentinel-secret", "spring.data.redis.password=data-secret",
                        "spring.data.redis.database=1")
                .run(context -> {
                    RedisURI uri = server(context.getBean(FencedRedisConnection.class));
                    assertThat(uri.getSentinelMasterId()).isEqualTo("orders-primary");
                    assertThat(uri.getSentinels()).extracting(RedisURI::getHost, RedisURI::getPort)
                            .containsExactly(org.assertj.core.groups.Tuple.tuple("10.0.0.1", 26379),
                                    org.assertj.core.groups.Tuple.tuple("10.0.0.2", 26380));
                    assertThat(uri.getSentinels()).allSatisfy(sentinel ->
                            assertThat(new String(sentinel.getPassword())).isEqualTo("sentinel-secret"));
                    assertThat(new String(uri.getPassword())).isEqualTo("data-secret");
                    assertThat(uri.getDatabase()).isEqualTo(1);
                });
    }

    @Test
    void clusterSettingsGiveEveryNodeTheCredentials() {
        runner.withPropertyValues("spring.data.redis.cluster.nodes=10.0.0.5:7000,10.0.0.6:7001",
                        "spring.data.redis.username=app", "spring.data.redis.password=s3cret")
                .run(context -> {
                    RedisAddress address = context.getBean(FencedRedisConnection.class).address();
                    assertThat(address).isInstanceOf(RedisAddress.Cluster.class);
                    List<RedisURI> nodes = ((RedisAddress.Cluster) address).nodes();
                    assertThat(nodes).extracting(RedisURI::getHost, RedisURI::getPort)
                            .containsExactly(org.assertj.core.groups.Tuple.tuple("10.0.0.5", 7000),
                                    org.assertj.core.groups.Tuple.tuple("10.0.0.6", 7001));
                    assertThat(nodes).allSatisfy(node -> {
                        assertThat(node.getUsername()).isEqualTo("app");
                        assertThat(new String(node.getPassword())).isEqualTo("s3cret");
                    });
                });
    }

    @Test
    void aStaticPrimaryReplicaSetFailsTheContext() {
        runner.withPropertyValues("spring.data.redis.masterreplica.nodes=10.0.0.5:6379,10.0.0.6:6379")
                .run(context -> assertThat(context).hasFailed().getFailure().rootCause().hasMessage(
                        "Fenced cannot use spring.data.redis.masterreplica: locks are taken on the primary, and a static "
                                + "primary/replica set does not say which node that is; set fenced.redis-uri to the primary, "
                                + "or use Sentinel"));
    }

    @Test
    void fencedRedisUriWinsOverSpringDataRedis() {
        runner.withPropertyValues("fenced.redis-uri=redis://10.0.0.9:6380", "spring.data.redis.host=redis.internal")
                .run(context -> assertThat(server(context.getBean(FencedRedisConnection.class)).getHost())
                        .isEqualTo("10.0.0.9"));
    }

    @Test
    void serviceConnectionDetailsWinOverProperties() {
        // What @ServiceConnection on a Redis container contributes.
        DataRedisConnectionDetails container = new DataRedisConnectionDetails() {
            @Override
            public String getPassword() {
                return "container-secret";
            }

            @Override
            public Standalone getStandalone() {
                return Standalone.of("172.17.0.2", 32768);
            }
        };
        runner.withBean(DataRedisConnectionDetails.class, () -> container)
                .withPropertyValues("spring.data.redis.host=redis.internal")
                .run(context -> {
                    RedisURI uri = server(context.getBean(FencedRedisConnection.class));
                    assertThat(uri.getHost()).isEqualTo("172.17.0.2");
                    assertThat(uri.getPort()).isEqualTo(32768);
                    assertThat(new String(uri.getPassword())).isEqualTo("container-secret");
                });
    }

    @Test
    void theClientRunsOnTheApplicationsLettuceResources() {
        runner.run(context -> assertThat(context.getBean(FencedRedisConnection.class).lettuceClient().getResources())
                .isSameAs(context.getBean(ClientResources.class)));
    }

    @Test
    void withoutLettuceResourcesTheClientHasItsOwn() {
        new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(FencedLockAutoConfiguration.class))
                .withPropertyValues("fenced.redis-uri=redis://10.0.0.9:6380")
                .run(context -> assertThat(context.getBean(FencedRedisConnection.class).lettuceClient()).isNull());
    }

    private static RedisURI server(FencedRedisConnection connection) {
        assertThat(connection.address()).isInstanceOf(RedisAddress.Server.class);
        return ((RedisAddress.Server) connection.address()).uri();
    }
}
