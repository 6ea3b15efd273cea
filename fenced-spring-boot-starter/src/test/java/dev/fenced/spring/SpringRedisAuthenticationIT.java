package dev.fenced.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.LockServiceException;
import dev.fenced.testservices.RedisProcess;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.data.redis.autoconfigure.DataRedisAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/**
 * The starter against a real password-protected Redis with an ACL user, configured the Spring way alone
 * ({@code spring.data.redis.*}). The server is a {@code redis-server} of its own on a free loopback port (the one
 * on the PATH, else the embedded-redis artifact's).
 */
class SpringRedisAuthenticationIT {

    private static final String DEFAULT_PASSWORD = "default-secret";
    private static final String ACL_USER = "fenced-app";
    private static final String ACL_PASSWORD = "app-secret";

    private static RedisProcess redis;

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(DataRedisAutoConfiguration.class, FencedLockAutoConfiguration.class))
            .withPropertyValues("fenced.redis-uri=", "fenced.lease-time=5s", "spring.data.redis.host=127.0.0.1");

    @BeforeAll
    static void startProtectedRedis() {
        redis = RedisProcess.start();
        // The ACL user may touch only keys and channels under "acl:"; then the default user gets a password (after
        // which this unauthenticated helper connection can no longer talk to the server).
        // (resetchannels: Redis 6.2, the embedded binary, gives a new user every channel by default.)
        redis.call("ACL", "SETUSER", ACL_USER, "on", ">" + ACL_PASSWORD, "~acl:*", "resetchannels", "&acl:*", "+@all");
        redis.call("CONFIG", "SET", "requirepass", DEFAULT_PASSWORD);
    }

    @AfterAll
    static void stopRedis() {
        if (redis != null) {
            redis.close();
        }
    }

    @Test
    void thePasswordFromSpringDataRedisIsUsed() {
        runner.withPropertyValues("spring.data.redis.port=" + redis.port(), "spring.data.redis.password=" + DEFAULT_PASSWORD,
                        "spring.data.redis.database=3", "fenced.key-prefix=pw:")
                .run(context -> {
                    FencedLease lease = context.getBean(FencedLockClient.class).acquire("order:1").block(Duration.ofSeconds(10));
                    assertThat(lease.token()).isPositive();
                    try (Inspector inspector = new Inspector(RedisURI.builder().withHost("127.0.0.1").withPort(redis.port())
                            .withPassword(DEFAULT_PASSWORD.toCharArray()).withDatabase(3).build())) {
                        assertThat(inspector.connection.sync().get("pw:{order:1}")).as("the lock, in database 3")
                                .endsWith(":" + lease.token());
                    }
                    lease.release().block(Duration.ofSeconds(10));
                });
    }

    @Test
    void anAclUserFromSpringDataRedisIsUsed() {
        runner.withPropertyValues("spring.data.redis.port=" + redis.port(), "spring.data.redis.username=" + ACL_USER,
                        "spring.data.redis.password=" + ACL_PASSWORD, "fenced.key-prefix=acl:")
                .run(context -> {
                    FencedLease lease = context.getBean(FencedLockClient.class).acquire("order:2").block(Duration.ofSeconds(10));
                    assertThat(lease.token()).isPositive();
                    lease.release().block(Duration.ofSeconds(10));
                });
        // The same user outside its keys is refused: the connection really is that user's, not the default one's.
        runner.withPropertyValues("spring.data.redis.port=" + redis.port(), "spring.data.redis.username=" + ACL_USER,
                        "spring.data.redis.password=" + ACL_PASSWORD, "fenced.key-prefix=other:")
                .run(context -> assertThatThrownBy(() -> context.getBean(FencedLockClient.class).acquire("order:2")
                        .block(Duration.ofSeconds(10)))
                        .isInstanceOf(LockServiceException.class)
                        .hasStackTraceContaining("NOPERM"));
    }

    @Test
    void withoutThePasswordTheServerRefusesTheClient() {
        runner.withPropertyValues("spring.data.redis.port=" + redis.port(), "fenced.key-prefix=nopw:")
                .run(context -> assertThatThrownBy(() -> context.getBean(FencedLockClient.class).acquire("order:3")
                        .block(Duration.ofSeconds(10)))
                        .isInstanceOf(LockServiceException.class)
                        .hasStackTraceContaining("NOAUTH"));
    }

    /** A plain Lettuce connection to look at what the client wrote. */
    private static final class Inspector implements AutoCloseable {

        private final RedisClient client;
        private final StatefulRedisConnection<String, String> connection;

        Inspector(RedisURI uri) {
            client = RedisClient.create(uri);
            connection = client.connect();
        }

        @Override
        public void close() {
            connection.close();
            client.shutdown();
        }
    }
}
