package dev.fenced.lock.internal.redis;

import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.api.reactive.RedisClusterReactiveCommands;
import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import reactor.core.publisher.Mono;

/**
 * Connections to one server: addressed directly ({@code redis://}) or found through Sentinel
 * ({@code redis-sentinel://}), in which case Lettuce asks the Sentinels for the primary on every
 * (re)connect and so follows a failover. Release notifications use plain {@code PUBLISH}/{@code SUBSCRIBE}.
 */
final class StandaloneConnections extends BaseConnections<StatefulRedisConnection<String, String>,
        StatefulRedisPubSubConnection<String, String>> {

    private StandaloneConnections(RedisClient client, boolean owns, RedisURI uri, String keyPrefix, RedisConnections.Listener listener) {
        super(client, owns, keyPrefix,
                () -> client.connectAsync(Utf8Codec.UTF8, uri),
                () -> client.connectPubSubAsync(Utf8Codec.UTF8, uri),
                listener);
    }

    /**
     * Connections on a Lettuce client created and owned here: commands are rejected while disconnected
     * (never buffered) and time out after the command timeout.
     */
    static StandaloneConnections owned(RedisURI uri, Duration commandTimeout, String keyPrefix, RedisConnections.Listener listener) {
        io.lettuce.core.resource.ClientResources resources = LockClientResources.create();
        try {
            RedisClient client = RedisClient.create(resources, uri);
            client.setOptions(lockClientOptions(ClientOptions.builder(), commandTimeout).build());
            return new StandaloneConnections(client, true, uri, keyPrefix, listener);
        } catch (RuntimeException e) {
            resources.shutdown(0, 2, TimeUnit.SECONDS);
            throw e;
        }
    }

    /** Connections on a Lettuce client shared with the application, which keeps its options. */
    static StandaloneConnections shared(RedisClient client, RedisURI uri, String keyPrefix, RedisConnections.Listener listener) {
        return new StandaloneConnections(client, false, uri, keyPrefix, listener);
    }

    @Override
    RedisClusterReactiveCommands<String, String> reactive(StatefulRedisConnection<String, String> connection) {
        return connection.reactive();
    }

    @Override
    StatefulRedisPubSubConnection<String, String> listen(StatefulRedisPubSubConnection<String, String> connection,
            RedisConnections.Listener listener) {
        connection.addListener(new RedisPubSubAdapter<>() {
            @Override
            public void message(String channel, String message) {
                listener.released(channel);
            }
        });
        return connection;
    }

    @Override
    public Mono<RedisClusterReactiveCommands<String, String>> acknowledgedCommandsAt(String key) {
        return acknowledgedConnection().map(StatefulRedisConnection::reactive);
    }

    @Override
    public boolean cluster() {
        return false;
    }

    @Override
    public String nodeOf(String key) {
        return "";
    }

    @Override
    public boolean shardedPubSub() {
        return false;
    }

    @Override
    public Mono<Void> subscribe(String channel) {
        return pubSub().flatMap(c -> c.reactive().subscribe(channel));
    }

    @Override
    public Mono<Void> unsubscribe(String channel) {
        return pubSub().flatMap(c -> c.reactive().unsubscribe(channel));
    }
}
