package dev.fenced.demo;

import dev.fenced.lock.FencedLockClient;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.core.env.Environment;

/**
 * Creates a {@link FencedLockClient} from {@link FencedProperties}, unless the application defines its own.
 * The client is closed when the context closes (its {@code close()} waits for held leases to be released;
 * shutdown runs on a thread that may block).
 *
 * <p>Written so that it can move unchanged into a starter module: it depends on nothing else of the demo.
 */
@AutoConfiguration
@ConditionalOnClass(FencedLockClient.class)
@EnableConfigurationProperties(FencedProperties.class)
public class FencedLockAutoConfiguration {

    /** Creates the auto-configuration; Spring calls this. */
    public FencedLockAutoConfiguration() {
    }

    /**
     * The lock client.
     *
     * @param properties the {@code fenced.*} settings
     * @param environment to find a Redis address given the Spring Data Redis way
     * @return a client; no connection is made until the first acquire
     */
    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    public FencedLockClient fencedLockClient(FencedProperties properties, Environment environment) {
        FencedLockClient.Builder builder = FencedLockClient.builder()
                .redisUri(redisUri(properties, environment))
                .keyPrefix(properties.keyPrefix())
                .leaseTime(properties.leaseTime())
                .maxWait(properties.maxWait());
        if (properties.renewalPeriod() != null) {
            builder.renewalPeriod(properties.renewalPeriod());
        }
        return builder.build();
    }

    /**
     * The Redis address: {@code fenced.redis-uri} (also as {@code FENCED_REDIS_URI}), else
     * {@code spring.data.redis.url}, else {@code spring.data.redis.host}/{@code port}, else the default
     * {@code redis://127.0.0.1:6379}.
     */
    static String redisUri(FencedProperties properties, Environment environment) {
        String uri = properties.redisUri();
        if (uri == null || uri.isBlank()) {
            uri = environment.getProperty("fenced.redis-uri");
        }
        if (uri == null || uri.isBlank()) {
            uri = environment.getProperty("spring.data.redis.url");
        }
        if (uri == null || uri.isBlank()) {
            String host = environment.getProperty("spring.data.redis.host", "127.0.0.1");
            String port = environment.getProperty("spring.data.redis.port", "6379");
            uri = "redis://" + host + ":" + port;
        }
        return uri;
    }
}
