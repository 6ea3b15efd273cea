package dev.fenced.spring;

import io.lettuce.core.RedisURI;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.data.redis.autoconfigure.DataRedisConnectionDetails;
import org.springframework.boot.data.redis.autoconfigure.DataRedisProperties;

/**
 * Turns Spring Boot's Redis connection details (from {@code spring.data.redis.*}, or from a
 * {@code @ServiceConnection} container) into the address of the lock client, keeping what Spring Data Redis
 * itself would use: username, password, database, TLS, client name, Sentinel (with its own credentials) and
 * cluster nodes. Loaded only when {@code spring-boot-data-redis} is on the class path.
 *
 * <p>An SSL bundle turns TLS on, but its key and trust stores are not applied: the lock client's builder takes no
 * Lettuce SSL options, so the JVM's trust store checks the server.
 */
final class SpringDataRedisAddress {

    private SpringDataRedisAddress() {
    }

    /**
     * The address that {@code details} describe.
     *
     * @param details the connection details
     * @param properties the {@code spring.data.redis.*} properties, for TLS without an SSL bundle and the client
     *     name; {@code null} when the Spring Data Redis auto-configuration did not run
     * @return the address
     * @throws IllegalStateException for a static primary/replica set, which has no single primary to lock on
     */
    static RedisAddress of(DataRedisConnectionDetails details, @Nullable DataRedisProperties properties) {
        if (details.getMasterReplica() != null) {
            throw new IllegalStateException("Fenced cannot use spring.data.redis.masterreplica: locks are taken on the "
                    + "primary, and a static primary/replica set does not say which node that is; "
                    + "set fenced.redis-uri to the primary, or use Sentinel");
        }
        boolean ssl = details.getSslBundle() != null || properties != null && (properties.getSsl().isEnabled()
                || properties.getUrl() != null && properties.getUrl().startsWith("rediss://"));
        String clientName = properties == null ? null : properties.getClientName();
        DataRedisConnectionDetails.Cluster cluster = details.getCluster();
        if (cluster != null) {
            return new RedisAddress.Cluster(cluster.getNodes().stream()
                    .map(node -> common(RedisURI.builder().withHost(node.host()).withPort(node.port()),
                            details, ssl, clientName).build())
                    .toList());
        }
        DataRedisConnectionDetails.Sentinel sentinel = details.getSentinel();
        if (sentinel != null) {
            RedisURI.Builder builder = RedisURI.builder().withSentinelMasterId(sentinel.getMaster())
                    .withDatabase(sentinel.getDatabase());
            for (DataRedisConnectionDetails.Node node : sentinel.getNodes()) {
                RedisURI.Builder sentinelUri = RedisURI.builder().withHost(node.host()).withPort(node.port()).withSsl(ssl);
                credentials(sentinelUri, sentinel.getUsername(), sentinel.getPassword());
                builder.withSentinel(sentinelUri.build());
            }
            return new RedisAddress.Server(common(builder, details, ssl, clientName).build());
        }
        DataRedisConnectionDetails.Standalone standalone = details.getStandalone();
        RedisURI.Builder builder = RedisURI.builder().withHost(standalone.getHost()).withPort(standalone.getPort())
                .withDatabase(standalone.getDatabase());
        return new RedisAddress.Server(common(builder, details, ssl, clientName).build());
    }

    private static RedisURI.Builder common(RedisURI.Builder builder, DataRedisConnectionDetails details, boolean ssl,
            @Nullable String clientName) {
        builder.withSsl(ssl);
        if (clientName != null && !clientName.isBlank()) {
            builder.withClientName(clientName);
        }
        return credentials(builder, details.getUsername(), details.getPassword());
    }

    private static RedisURI.Builder credentials(RedisURI.Builder builder, @Nullable String username, @Nullable String password) {
        if (password != null && !password.isEmpty()) {
            if (username != null && !username.isEmpty()) {
                builder.withAuthentication(username, password);
            } else {
                builder.withPassword(password.toCharArray());
            }
        }
        return builder;
    }
}
