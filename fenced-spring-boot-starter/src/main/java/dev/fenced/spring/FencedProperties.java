package dev.fenced.spring;

import java.time.Duration;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * Settings of the {@link dev.fenced.lock.FencedLockClient} that {@link FencedLockAutoConfiguration} creates,
 * under the prefix {@code fenced}. Defaults are the library's.
 *
 * <p>Immutable and thread-safe.
 *
 * @param redisUri the Redis server ({@code redis://host:port}); when absent, {@code spring.data.redis.url},
 *     else {@code spring.data.redis.host}/{@code port}, else {@code redis://127.0.0.1:6379}
 * @param keyPrefix the prefix of every key the client uses; clients that must exclude each other share it
 * @param leaseTime the default lease time
 * @param renewalPeriod how often held leases are renewed; absent means a third of the lease time
 * @param maxWait how long an acquire waits for a held lock
 */
@ConfigurationProperties(prefix = "fenced")
public record FencedProperties(
        @Nullable String redisUri,
        @DefaultValue("fenced:") String keyPrefix,
        @DefaultValue("30s") Duration leaseTime,
        @Nullable Duration renewalPeriod,
        @DefaultValue("30s") Duration maxWait) {
}
