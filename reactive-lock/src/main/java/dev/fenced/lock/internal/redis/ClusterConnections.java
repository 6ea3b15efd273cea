package dev.fenced.lock.internal.redis;

import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.ClusterTopologyRefreshOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.SlotHash;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.reactive.RedisClusterReactiveCommands;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;
import io.lettuce.core.cluster.pubsub.RedisClusterPubSubAdapter;
import io.lettuce.core.cluster.pubsub.StatefulRedisClusterPubSubConnection;
import java.time.Duration;
import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * Connections to a Redis Cluster through Lettuce's cluster client, which routes every keyed command to the
 * node serving its slot and follows {@code MOVED}/{@code ASK} redirections. All keys of a lock share one
 * slot, so every lock command runs on one node. On Redis 7 and later, release notifications use sharded
 * pub/sub, which stays on the slot's node instead of being broadcast to the whole cluster.
 */
final class ClusterConnections extends BaseConnections<StatefulRedisClusterConnection<String, String>,
        StatefulRedisClusterPubSubConnection<String, String>> {

    /** Whether the cluster has sharded pub/sub, as its answer to the first SSUBSCRIBE said; null before. */
    private volatile @Nullable Boolean sharded;

    private ClusterConnections(RedisClusterClient client, boolean owns, String keyPrefix, RedisConnections.Listener listener) {
        super(client, owns, keyPrefix,
                // Lettuce connects only once it knows the topology; loading it first never blocks a thread.
                () -> client.refreshPartitionsAsync().thenCompose(loaded -> client.connectAsync(Utf8Codec.UTF8)),
                () -> client.refreshPartitionsAsync().thenCompose(loaded -> client.connectPubSubAsync(Utf8Codec.UTF8)),
                listener);
    }

    /**
     * Connections on a cluster client created and owned here: commands rejected while disconnected, the
     * command timeout, and a topology refreshed on redirections and reconnects and every 30 seconds.
     */
    static ClusterConnections owned(List<RedisURI> seeds, Duration commandTimeout, String keyPrefix, RedisConnections.Listener listener) {
        io.lettuce.core.resource.ClientResources resources = LockClientResources.create();
        try {
            RedisClusterClient client = RedisClusterClient.create(resources, seeds);
            ClusterClientOptions.Builder options = lockClientOptions(ClusterClientOptions.builder(), commandTimeout);
            options.topologyRefreshOptions(ClusterTopologyRefreshOptions.builder()
                    .enableAllAdaptiveRefreshTriggers()
                    .enablePeriodicRefresh(Duration.ofSeconds(30))
                    .build());
            client.setOptions(options.build());
            return new ClusterConnections(client, true, keyPrefix, listener);
        } catch (RuntimeException e) {
            resources.shutdown(0, 2, java.util.concurrent.TimeUnit.SECONDS); // bad seeds: no threads left behind
            throw e;
        }
    }

    /** Connections on a cluster client shared with the application, which keeps its options. */
    static ClusterConnections shared(RedisClusterClient client, String keyPrefix, RedisConnections.Listener listener) {
        return new ClusterConnections(client, false, keyPrefix, listener);
    }

    @Override
    RedisClusterReactiveCommands<String, String> reactive(StatefulRedisClusterConnection<String, String> connection) {
        return connection.reactive();
    }

    @Override
    StatefulRedisClusterPubSubConnection<String, String> listen(StatefulRedisClusterPubSubConnection<String, String> connection,
            RedisConnections.Listener listener) {
        // Sharded subscriptions live on node connections; their messages reach this listener only with propagation on.
        connection.setNodeMessagePropagation(true);
        connection.addListener(new RedisClusterPubSubAdapter<>() {
            @Override
            public void message(RedisClusterNode node, String channel, String message) {
                listener.released(channel);
            }

            @Override
            public void smessage(RedisClusterNode node, String channel, String message) {
                listener.released(channel);
            }

            @Override
            public void sunsubscribed(RedisClusterNode node, String channel, long count) {
                // Also pushed by the server when the channel's slot moves away: subscribe again where it went.
                listener.unsubscribed(channel);
            }
        });
        return connection;
    }

    @Override
    public boolean cluster() {
        return true;
    }

    @Override
    public Mono<RedisClusterReactiveCommands<String, String>> acknowledgedCommandsAt(String key) {
        return acknowledgedConnection().flatMap(c -> {
            RedisClusterNode node = c.getPartitions().getPartitionBySlot(SlotHash.getSlot(key));
            if (node == null) {
                return Mono.error(new IllegalStateException("no node serves the slot of '" + key + "'"));
            }
            return Mono.fromCompletionStage(c.getConnectionAsync(node.getNodeId()))
                    .map(nodeConnection -> {
                        requireOpen(nodeConnection);
                        return (RedisClusterReactiveCommands<String, String>) nodeConnection.reactive();
                    });
        });
    }

    @Override
    public String nodeOf(String key) {
        StatefulRedisClusterConnection<String, String> c = currentConnection();
        RedisClusterNode node = c == null ? null : c.getPartitions().getPartitionBySlot(SlotHash.getSlot(key));
        return node == null ? "" : node.getNodeId();
    }

    @Override
    public boolean shardedPubSub() {
        // The release script publishes with SPUBLISH where the server has it, whatever this client knows of it.
        return true;
    }

    @Override
    public Mono<Void> subscribe(String channel) {
        // Lettuce sends SSUBSCRIBE to the node serving the channel's slot. Whether the server has sharded
        // pub/sub is learned from its answer, not from INFO (which a client may not be allowed to read), so that
        // subscribers and the release script always agree.
        return pubSub().flatMap(c -> {
            if (Boolean.FALSE.equals(sharded)) {
                return c.reactive().subscribe(channel);
            }
            return c.reactive().ssubscribe(channel)
                    .doOnSuccess(done -> sharded = true)
                    .onErrorResume(RedisCommandExecutionException.class, e -> {
                        if (!String.valueOf(e.getMessage()).toLowerCase(java.util.Locale.ROOT).contains("unknown command")) {
                            return Mono.error(e);
                        }
                        sharded = false; // before Redis 7: plain pub/sub, which the script falls back to as well
                        return c.reactive().subscribe(channel);
                    });
        });
    }

    @Override
    public Mono<Void> unsubscribe(String channel) {
        return pubSub().flatMap(c -> Boolean.FALSE.equals(sharded)
                ? c.reactive().unsubscribe(channel)
                : c.reactive().sunsubscribe(channel));
    }
}
