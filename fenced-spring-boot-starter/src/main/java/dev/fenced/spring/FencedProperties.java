package dev.fenced.spring;

import dev.fenced.lock.FencedLockClientBuilder;
import java.time.Duration;
import java.util.List;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * Settings of the {@link dev.fenced.lock.FencedLockClient} that {@link FencedLockAutoConfiguration} creates,
 * under the prefix {@code fenced}. Defaults are the library's.
 *
 * <p>Immutable and thread-safe.
 *
 * <p>The Redis address is, in this order: {@code fenced.cluster-nodes}; {@code fenced.redis-uri}; Spring Boot's
 * Redis connection details (the {@code spring.data.redis.*} properties, or a {@code @ServiceConnection}
 * container), with username, password, database, TLS, Sentinel and cluster settings, when
 * {@code spring-boot-data-redis} is on the class path; else {@code redis://127.0.0.1:6379}.
 *
 * @param redisUri the Redis server in Lettuce's URI syntax ({@code redis://user:password@host:port/database},
 *     {@code rediss://...} for TLS, or {@code redis-sentinel://host:port,...#primary} to follow failovers through
 *     Sentinel)
 * @param clusterNodes nodes of a Redis Cluster ({@code host:port} or {@code redis://host:port})
 * @param keyPrefix the prefix of every key the client uses; clients that must exclude each other share it
 * @param holderLabel the holder label stored with every grant, shown by the fleet view of every instance (the
 *     {@code fencedlocks} endpoint): at most 200 characters, no control characters; absent means
 *     {@code spring.application.name@host (pid N)}
 * @param holderLabelEnabled whether grants store a holder label at all (one write per grant, none per renewal);
 *     default {@code true}
 * @param leaseTime the default lease time
 * @param renewalPeriod how often held leases are renewed; absent means a third of the lease time
 * @param maxWait how long an acquire waits for a held lock
 * @param replicaAcknowledgement how many replicas must acknowledge an acquire ({@code WAIT}); none by default
 * @param commandTimeout how long one lock command may take; absent means the library's default (a third of the
 *     lease time, at most 5 s). {@code spring.data.redis.timeout} is not used: it is chosen for the application's
 *     own commands, and a lock command must time out well within the lease
 * @param jobs settings of {@link FencedScheduled} jobs, under {@code fenced.jobs}
 */
@ConfigurationProperties(prefix = "fenced")
public record FencedProperties(
        @Nullable String redisUri,
        @Nullable String keyPrefix,
        @Nullable String holderLabel,
        @DefaultValue("true") boolean holderLabelEnabled,
        @Nullable Duration leaseTime,
        @Nullable Duration renewalPeriod,
        @Nullable Duration maxWait,
        @Nullable List<String> clusterNodes,
        @DefaultValue ReplicaAcknowledgement replicaAcknowledgement,
        @Nullable Duration commandTimeout,
        @DefaultValue Jobs jobs) {

    /** Fills in the library's defaults (FencedLockClientBuilder's), so that there is one place for them. */
    public FencedProperties {
        keyPrefix = keyPrefix != null ? keyPrefix : FencedLockClientBuilder.DEFAULT_KEY_PREFIX;
        leaseTime = leaseTime != null ? leaseTime : FencedLockClientBuilder.DEFAULT_LEASE_TIME;
        maxWait = maxWait != null ? maxWait : FencedLockClientBuilder.DEFAULT_MAX_WAIT;
    }

    /**
     * Settings of {@link FencedScheduled} jobs, under {@code fenced.jobs}.
     *
     * @param namePrefix prepended to the name of every {@code @FencedScheduled} job to make its lock name (for
     *     example {@code "job:"}); empty by default
     */
    public record Jobs(@DefaultValue("") String namePrefix) {
    }

    /**
     * Replica acknowledgement of acquires, under {@code fenced.replica-acknowledgement}.
     *
     * @param replicas how many replicas must acknowledge; 0 (the default) for none
     * @param timeout how long an acquire waits for them; default 200 ms
     */
    public record ReplicaAcknowledgement(@DefaultValue("0") int replicas, @DefaultValue("200ms") Duration timeout) {
    }
}
