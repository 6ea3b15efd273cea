package dev.fenced.spring;

import dev.fenced.lock.FencedLockClientBuilder;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.LockObserver;
import dev.fenced.lock.micrometer.MicrometerLockObserver;
import io.lettuce.core.RedisURI;
import io.lettuce.core.resource.ClientResources;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.observation.ObservationRegistry;
import java.util.List;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint;
import org.springframework.boot.data.redis.autoconfigure.DataRedisConnectionDetails;
import org.springframework.boot.data.redis.autoconfigure.DataRedisProperties;
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
 * The Redis address is {@code fenced.cluster-nodes}, else {@code fenced.redis-uri}, else Spring Boot's Redis
 * connection details ({@code spring.data.redis.*} with its credentials, database, TLS, Sentinel and cluster
 * settings, or a {@code @ServiceConnection} container) when {@code spring-boot-data-redis} is on the class
 * path, else {@code redis://127.0.0.1:6379}. With a Lettuce {@code ClientResources} bean (Spring Data Redis
 * defines one), the client runs on those resources. The client is closed when the context closes (its
 * {@code close()} waits for held leases to be released; shutdown runs on a thread that may block).
 *
 * <p>With Micrometer present, the client records {@code fenced.lock.*} meters; with Actuator's health support,
 * a {@code fenced} health indicator pings the lock service; with Actuator, the {@code fenced} endpoint lists
 * held leases. User beans of these types win.
 */
@AutoConfiguration(afterName = "org.springframework.boot.data.redis.autoconfigure.DataRedisAutoConfiguration")
@ConditionalOnClass(FencedLockClient.class)
@EnableConfigurationProperties(FencedProperties.class)
public class FencedLockAutoConfiguration {

    /** Creates the auto-configuration; Spring calls this. */
    public FencedLockAutoConfiguration() {
    }

    /**
     * Where and how the client reaches Redis; see the class description for the order of the sources.
     *
     * @param properties the {@code fenced.*} settings
     * @param springRedis the address in Spring Boot's Redis connection details, if that support is present
     * @param resources the application's Lettuce resources, if it has exactly one such bean
     * @param environment to tell a {@code spring.data.redis.*} setting that nothing would read
     * @return the connection settings, closed after the client
     */
    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean(FencedLockClient.class)
    FencedRedisConnection fencedRedisConnection(FencedProperties properties, ObjectProvider<SpringRedisAddress> springRedis,
            ObjectProvider<ClientResources> resources, Environment environment) {
        SpringRedisAddress spring = springRedis.getIfAvailable();
        return FencedRedisConnection.of(redisAddress(properties, spring == null ? null : spring.address(), environment),
                resources.getIfUnique());
    }

    /**
     * The lock client.
     *
     * @param properties the {@code fenced.*} settings
     * @param connection where and how to reach Redis
     * @param observer the observer of lock events, if any
     * @return a client; no connection is made until the first acquire
     */
    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    FencedLockClient fencedLockClient(FencedProperties properties, FencedRedisConnection connection,
            ObjectProvider<LockObserver> observer, Environment environment) {
        FencedLockClientBuilder builder = connection.applyTo(FencedLockClient.builder());
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
        if (properties.commandTimeout() != null) {
            builder.commandTimeout(properties.commandTimeout());
        }
        observer.ifAvailable(builder::observer);
        applyHolderLabel(builder, properties, environment);
        return builder.build();
    }

    /**
     * The holder label: none with {@code fenced.holder-label-enabled=false}, else {@code fenced.holder-label}, else
     * {@code spring.application.name@host (pid N)}.
     *
     * @param builder the client's builder
     * @param properties the Fenced properties
     * @param environment the environment, for {@code spring.application.name}
     * @throws IllegalArgumentException for a label the builder refuses (too long, control characters)
     */
    static void applyHolderLabel(FencedLockClientBuilder builder, FencedProperties properties, Environment environment) {
        if (!properties.holderLabelEnabled()) {
            builder.noHolderLabel();
            return;
        }
        String label = properties.holderLabel();
        if (label == null || label.isBlank()) {
            label = FencedLockClientBuilder.defaultHolderLabel(environment.getProperty("spring.application.name"));
        }
        try {
            builder.holderLabel(label);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("fenced.holder-label: " + e.getMessage(), e);
        }
    }

    /**
     * The address the client connects to: {@code fenced.cluster-nodes}, else {@code fenced.redis-uri}, else
     * {@code springRedis}, else {@code redis://127.0.0.1:6379}.
     *
     * @param properties the Fenced properties
     * @param springRedis the address from Spring Boot's Redis connection details, or {@code null} without them
     * @param environment the environment
     * @return the address
     * @throws IllegalStateException if {@code springRedis} is {@code null} but {@code spring.data.redis.*} settings
     *     are present, which would otherwise be ignored (with their password)
     * @throws IllegalArgumentException if {@code fenced.redis-uri} or a cluster node is not a Redis URI
     */
    static RedisAddress redisAddress(FencedProperties properties, @Nullable RedisAddress springRedis, Environment environment) {
        List<RedisURI> cluster = properties.clusterNodes() == null ? List.of() : properties.clusterNodes().stream()
                .map(String::trim)
                .filter(node -> !node.isEmpty())
                .map(node -> parse("fenced.cluster-nodes", node.contains("://") ? node : "redis://" + node))
                .toList();
        if (!cluster.isEmpty()) {
            return new RedisAddress.Cluster(cluster);
        }
        String uri = properties.redisUri();
        if (uri != null && !uri.isBlank()) {
            return new RedisAddress.Server(parse("fenced.redis-uri", uri));
        }
        if (springRedis != null) {
            return springRedis;
        }
        for (String key : SPRING_DATA_REDIS_KEYS) {
            if (environment.containsProperty(key)) {
                throw new IllegalStateException(key + " is set, but Fenced reads spring.data.redis.* only through "
                        + "Spring Boot's Redis support, which is not active: add org.springframework.boot:"
                        + "spring-boot-starter-data-redis, or set fenced.redis-uri");
            }
        }
        return new RedisAddress.Server(RedisURI.create(DEFAULT_REDIS_URI));
    }

    private static RedisURI parse(String property, String uri) {
        try {
            return RedisURI.create(uri);
        } catch (RuntimeException e) {
            // Not the value: it may hold a password.
            throw new IllegalArgumentException(property + " has a value that is not a Redis URI: " + e.getMessage(), e);
        }
    }

    private static final String DEFAULT_REDIS_URI = "redis://127.0.0.1:6379";

    // The settings that name a server or its credentials; any of them unread would connect elsewhere, or without auth.
    private static final List<String> SPRING_DATA_REDIS_KEYS = List.of("spring.data.redis.url", "spring.data.redis.host",
            "spring.data.redis.port", "spring.data.redis.username", "spring.data.redis.password",
            "spring.data.redis.database", "spring.data.redis.ssl.enabled", "spring.data.redis.sentinel.master",
            "spring.data.redis.sentinel.nodes", "spring.data.redis.cluster.nodes");

    /** The address in Spring Boot's Redis connection details; {@code null} when no such bean exists. */
    interface SpringRedisAddress {

        /**
         * The address.
         *
         * @return the address, or {@code null}
         */
        @Nullable RedisAddress address();
    }

    /** With Spring Boot's Redis support present: its connection details are an address source. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.boot.data.redis.autoconfigure.DataRedisConnectionDetails")
    static class SpringDataRedisConfiguration {

        /**
         * The address in the connection details, read when the client is created.
         *
         * @param details the connection details ({@code spring.data.redis.*}, or a service connection)
         * @param properties the {@code spring.data.redis.*} properties, when Spring Data Redis's auto-configuration ran
         * @return the source
         */
        @Bean
        SpringRedisAddress fencedSpringDataRedisAddress(ObjectProvider<DataRedisConnectionDetails> details,
                ObjectProvider<DataRedisProperties> properties) {
            return () -> {
                DataRedisConnectionDetails found = details.getIfAvailable();
                return found == null ? null : SpringDataRedisAddress.of(found, properties.getIfAvailable());
            };
        }
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
     * The Redis address as a string, for code that needs one besides the client (the demo's relay): {@code
     * fenced.redis-uri}, else {@code spring.data.redis.url}, else {@code spring.data.redis.host}/{@code port}, else
     * {@code redis://127.0.0.1:6379}. Credentials, TLS or Sentinel settings given apart from a URL are not in it;
     * the client itself connects with all of them.
     *
     * @param properties the Fenced properties
     * @param environment the environment
     * @return the URI
     */
    public static String redisUri(FencedProperties properties, Environment environment) {
        String uri = properties.redisUri();
        if (uri == null || uri.isBlank()) {
            uri = environment.getProperty("spring.data.redis.url");
        }
        if (uri == null || uri.isBlank()) {
            uri = "redis://" + environment.getProperty("spring.data.redis.host", "127.0.0.1") + ":"
                    + environment.getProperty("spring.data.redis.port", "6379");
        }
        return uri;
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

    /** With Actuator present: the {@code fenced} endpoint that lists held leases, and the {@code fencedlocks} fleet view. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint")
    static class EndpointConfiguration {

        /**
         * The endpoint, when it is exposed.
         *
         * @param client the lock client
         * @return the endpoint
         */
        @Bean
        @ConditionalOnMissingBean
        @ConditionalOnAvailableEndpoint
        FencedLeasesEndpoint fencedLeasesEndpoint(FencedLockClient client) {
            return new FencedLeasesEndpoint(HeldLeaseLists.of(client));
        }

        /**
         * The fleet-view endpoint {@code fencedlocks}, when it is exposed: read-only unless
         * {@code management.endpoint.fencedlocks.access=unrestricted}.
         *
         * @param client the lock client
         * @return the endpoint
         */
        @Bean
        @ConditionalOnMissingBean
        @ConditionalOnAvailableEndpoint
        FencedLocksEndpoint fencedLocksEndpoint(FencedLockClient client) {
            return new FencedLocksEndpoint(client);
        }
    }
}
