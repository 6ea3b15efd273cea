package dev.fenced.spring;

import dev.fenced.lock.FencedLockClientBuilder;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.LockObserver;
import dev.fenced.lock.micrometer.MicrometerLockObserver;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.observation.ObservationRegistry;
import java.util.List;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator;
import org.springframework.boot.health.contributor.ReactiveHealthIndicator;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;

/**
 * Creates a {@link FencedLockClient} from {@link FencedProperties}, unless the application defines its own.
 * The client is closed when the context closes (its {@code close()} waits for held leases to be released;
 * shutdown runs on a thread that may block).
 *
 * <p>With Micrometer present, the client records {@code fenced.lock.*} meters; with Actuator's health support,
 * a {@code fenced} health indicator pings the lock service. User beans of these types win.
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
    public FencedLockClient fencedLockClient(FencedProperties properties, Environment environment,
            ObjectProvider<LockObserver> observer) {
        FencedLockClientBuilder builder = FencedLockClient.builder();
        List<String> cluster = clusterNodes(properties, environment);
        if (cluster.isEmpty()) {
            builder.redisUri(redisUri(properties, environment));
        } else {
            builder.redisCluster(cluster.toArray(String[]::new));
        }
        if (properties.replicaAcknowledgement().replicas() > 0) {
            builder.replicaAcknowledgement(properties.replicaAcknowledgement().replicas(),
                    properties.replicaAcknowledgement().timeout());
        }
        builder.keyPrefix(properties.keyPrefix())
                .leaseTime(properties.leaseTime())
                .maxWait(properties.maxWait());
        if (properties.renewalPeriod() != null) {
            builder.renewalPeriod(properties.renewalPeriod());
        }
        observer.ifAvailable(builder::observer);
        return builder.build();
    }

    /**
     * With Micrometer present (Actuator brings it), lock metrics and acquire observations: meters
     * {@code fenced.lock.*}, tagged with the lock name's prefix before {@code ':'} (never the raw name).
     */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(MeterRegistry.class)
    static class MetricsConfiguration {

        /**
         * The observer that records lock metrics; records nothing when no meter registry is defined. The
         * registries are looked up when the client is created, so the order of auto-configurations does not
         * matter.
         *
         * @param meters the meter registry, if any
         * @param observations the observation registry, if any
         * @return the observer
         */
        @Bean
        @ConditionalOnMissingBean(LockObserver.class)
        LockObserver fencedLockObserver(ObjectProvider<MeterRegistry> meters, ObjectProvider<ObservationRegistry> observations) {
            MeterRegistry registry = meters.getIfAvailable();
            if (registry == null) {
                return LockObserver.NONE;
            }
            return MicrometerLockObserver.builder(registry)
                    .observationRegistry(observations.getIfAvailable(() -> ObservationRegistry.NOOP))
                    .lockTag(name -> name.indexOf(':') < 0 ? "other" : name.substring(0, name.indexOf(':')))
                    .build();
        }
    }

    /**
     * The Redis address: {@code fenced.redis-uri} (also as {@code FENCED_REDIS_URI}), else
     * {@code spring.data.redis.url}, else {@code spring.data.redis.host}/{@code port}, else the default
     * {@code redis://127.0.0.1:6379}.
     */
    public static String redisUri(FencedProperties properties, Environment environment) {
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

    /**
     * The nodes of a Redis Cluster as URIs: {@code fenced.cluster-nodes}, else
     * {@code spring.data.redis.cluster.nodes}; empty when neither is set. A node given as {@code host:port}
     * becomes {@code redis://host:port}.
     *
     * @param properties the Fenced properties
     * @param environment to find cluster nodes given the Spring Data Redis way
     * @return the node URIs, possibly empty
     */
    public static List<String> clusterNodes(FencedProperties properties, Environment environment) {
        List<String> nodes = properties.clusterNodes();
        if (nodes == null || nodes.isEmpty()) {
            String[] spring = environment.getProperty("spring.data.redis.cluster.nodes", String[].class);
            nodes = spring == null ? List.of() : List.of(spring);
        }
        return nodes.stream()
                .map(String::trim)
                .filter(node -> !node.isEmpty())
                .map(node -> node.contains("://") ? node : "redis://" + node)
                .toList();
    }

    /** With Actuator's health support present: the {@code fenced} health indicator. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(ReactiveHealthIndicator.class)
    @ConditionalOnEnabledHealthIndicator("fenced")
    static class HealthIndicatorConfiguration {

        /**
         * The health indicator.
         *
         * @param client the lock client
         * @return the indicator
         */
        @Bean
        @ConditionalOnMissingBean(name = "fencedHealthIndicator")
        FencedLockHealthIndicator fencedHealthIndicator(FencedLockClient client) {
            return new FencedLockHealthIndicator(client);
        }
    }
}
