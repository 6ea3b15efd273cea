package dev.fenced.spring;

import dev.fenced.lock.FencedLockClientBuilder;
import dev.fenced.lock.FencedLockClient;
import io.lettuce.core.AbstractRedisClient;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.ClusterTopologyRefreshOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.resource.ClientResources;
import java.time.Duration;
import org.jspecify.annotations.Nullable;

/**
 * How the auto-configured client reaches Redis: the address, and, when the application has a Lettuce
 * {@link ClientResources} bean (Spring Data Redis defines one), a Lettuce client on those resources, so that
 * locks share the application's event loops instead of starting their own; for a cluster, always a Lettuce
 * cluster client (on its own resources without such a bean). A Lettuce client created here is
 * shut down by {@link #close()}, after the lock client (which depends on this bean) has closed; the shared
 * resources stay the application's.
 *
 * <p>Thread-safe; immutable apart from {@link #close()}.
 */
final class FencedRedisConnection implements AutoCloseable {

    private final RedisAddress address;
    private final @Nullable AbstractRedisClient sharedClient;

    private FencedRedisConnection(RedisAddress address, @Nullable AbstractRedisClient sharedClient) {
        this.address = address;
        this.sharedClient = sharedClient;
    }

    /**
     * A connection to {@code address}, on {@code resources} if given. No connection is opened here.
     *
     * @param address where to connect
     * @param resources the application's Lettuce resources, or {@code null} for the lock client's own
     * @return the connection settings
     */
    static FencedRedisConnection of(RedisAddress address, @Nullable ClientResources resources) {
        // A cluster client is always created here: the builder takes cluster nodes only as strings, which would lose
        // credentials given apart from a URI. Clients created here get the options a lock client gives the Lettuce
        // clients it owns: a lock command is rejected while disconnected, never buffered; a cluster follows
        // reshards and failovers. (The lock client applies its own command and connect timeouts to them.)
        if (address instanceof RedisAddress.Cluster cluster) {
            RedisClusterClient client = resources == null
                    ? RedisClusterClient.create(cluster.nodes())
                    : RedisClusterClient.create(resources, cluster.nodes());
            client.setOptions(ClusterClientOptions.builder()
                    .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
                    .topologyRefreshOptions(ClusterTopologyRefreshOptions.builder()
                            .enableAllAdaptiveRefreshTriggers()
                            .enablePeriodicRefresh(Duration.ofSeconds(30))
                            .build())
                    .build());
            return new FencedRedisConnection(address, client);
        }
        if (resources == null) {
            return new FencedRedisConnection(address, null);
        }
        RedisClient client = RedisClient.create(resources);
        client.setOptions(ClientOptions.builder()
                .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
                .build());
        return new FencedRedisConnection(address, client);
    }

    /** The address. */
    RedisAddress address() {
        return address;
    }

    /** The Lettuce client created here, or {@code null} when the lock client creates its own. */
    @Nullable AbstractRedisClient lettuceClient() {
        return sharedClient;
    }

    /**
     * Points {@code builder} at the address, on the shared Lettuce client if there is one.
     *
     * @param builder the lock client's builder
     * @return the builder
     */
    FencedLockClientBuilder applyTo(FencedLockClientBuilder builder) {
        if (sharedClient instanceof RedisClusterClient client) {
            return builder.redisClusterClient(client);
        }
        RedisAddress.Server server = (RedisAddress.Server) address;
        return sharedClient instanceof RedisClient client
                ? builder.redisClient(client, server.uri())
                : builder.redisUri(server.uri());
    }

    /** Shuts down the Lettuce client created here, if any; the application's resources are left running. */
    @Override
    public void close() {
        if (sharedClient != null) {
            sharedClient.shutdown(Duration.ZERO, Duration.ofSeconds(2));
        }
    }
}
