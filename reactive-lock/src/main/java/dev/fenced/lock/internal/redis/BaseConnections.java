package dev.fenced.lock.internal.redis;

import dev.fenced.lock.internal.ClientSettings;
import io.lettuce.core.AbstractRedisClient;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisChannelHandler;
import io.lettuce.core.RedisConnectionStateListener;
import io.lettuce.core.SocketOptions;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.cluster.api.reactive.RedisClusterReactiveCommands;
import java.net.SocketAddress;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.WeakHashMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * What both kinds of {@link RedisConnections} share: a lazily opened command connection and a lazily opened
 * connection for acquires followed by {@code WAIT}, each inspecting the server when it opens (whichever reaches a
 * server of another identity first reports it), a lazily opened pub/sub connection, and closing.
 *
 * @param <C> the command connection type
 * @param <P> the pub/sub connection type
 */
abstract class BaseConnections<C extends StatefulConnection<String, String>, P extends StatefulConnection<String, String>>
        implements RedisConnections {

    private static final Logger log = Loggers.getLogger(BaseConnections.class);

    /** How long reading INFO may take before the server is taken as unknown. */
    private static final Duration INSPECT_TIMEOUT = Duration.ofSeconds(5);

    private final AbstractRedisClient client;
    private final boolean ownsClient;
    private final String keyPrefix;
    private final LazyConnection<C> commands;
    private final LazyConnection<C> acknowledged;
    private final LazyConnection<P> pubSub;
    private final RedisConnections.Listener listener;
    private final RedisConnectionStateListener reconnects = new RedisConnectionStateListener() {
        @Override
        public void onRedisConnected(RedisChannelHandler<?, ?> connection, SocketAddress address) {
            // The command connection, and the one that acquires with WAIT: whichever reaches a new server first
            // reports it, before a grant of that server is emitted.
            for (LazyConnection<C> lazy : List.of(commands, acknowledged)) {
                C current = lazy.current();
                if (current != null && current == (Object) connection) {
                    reinspect(current);
                }
            }
        }
    };
    private volatile ServerInfo server = ServerInfo.UNKNOWN;
    private final AtomicBoolean checked = new AtomicBoolean();
    /** The server each connection found when it last (re)connected, by its commands; weak, connections come and go. */
    private final Map<Object, ServerInfo> identities = Collections.synchronizedMap(new WeakHashMap<>());
    private final AtomicBoolean infoRefusalWarned = new AtomicBoolean();
    private volatile CompletableFuture<Void> verified = CompletableFuture.completedFuture(null);

    /**
     * @param client the Lettuce client
     * @param ownsClient whether closing shuts the client down
     * @param keyPrefix the key prefix, for warnings
     * @param connectCommands opens the command connection
     * @param connectPubSub opens the pub/sub connection
     * @param listener told of release notifications and lost subscriptions
     */
    BaseConnections(AbstractRedisClient client, boolean ownsClient, String keyPrefix,
            Supplier<CompletionStage<C>> connectCommands, Supplier<CompletionStage<P>> connectPubSub,
            RedisConnections.Listener listener) {
        this.client = client;
        this.ownsClient = ownsClient;
        this.keyPrefix = keyPrefix;
        this.listener = listener;
        this.commands = new LazyConnection<>(() -> connectCommands.get().toCompletableFuture().thenCompose(this::inspect));
        // Inspected too: with replica acknowledgement every grant comes on this connection, and the command
        // connection may not open before the first renewal (a failover before it must still be noticed).
        this.acknowledged = new LazyConnection<>(() -> connectCommands.get().toCompletableFuture().thenCompose(this::inspect));
        this.pubSub = new LazyConnection<>(() -> connectPubSub.get().toCompletableFuture()
                .thenApply(c -> listen(c, listener)));
        if (!cluster()) {
            // One server: its identity is the identity of the lock service. (A cluster's nodes each have one.)
            client.addListener(reconnects);
        }
    }

    /** The reactive commands of a command connection. */
    abstract RedisClusterReactiveCommands<String, String> reactive(C connection);

    /** Registers the listener that reports release notifications; returns the connection. */
    abstract P listen(P connection, RedisConnections.Listener listener);

    @Override
    public final Mono<RedisClusterReactiveCommands<String, String>> commands() {
        return connection().map(this::reactive);
    }

    @Override
    public final @Nullable RedisClusterReactiveCommands<String, String> openCommands() {
        C c = commands.current();
        return c != null && c.isOpen() ? reactive(c) : null;
    }

    @Override
    public final boolean ownsClient() {
        return ownsClient;
    }

    /** The open command connection: fails if it is not connected now. */
    final Mono<C> connection() {
        return commands.get().map(c -> {
            requireOpen(c);
            return c;
        });
    }

    /** The open connection for acquires followed by {@code WAIT}: fails if it is not connected now. */
    final Mono<C> acknowledgedConnection() {
        return acknowledged.get().map(c -> {
            requireOpen(c);
            return c;
        });
    }

    /** Fails if a connection is not connected now: a lock command must never wait in a reconnect buffer. */
    static void requireOpen(StatefulConnection<?, ?> c) {
        if (!c.isOpen()) {
            throw new RedisErrors.NotConnectedException();
        }
    }

    /** The command connection if it is open already, else {@code null}; never connects. */
    final @Nullable C currentConnection() {
        return commands.current();
    }

    /** The pub/sub connection, opened on first use. */
    final Mono<P> pubSub() {
        return pubSub.get();
    }

    @Override
    public final ServerInfo server() {
        return server;
    }

    @Override
    public final Mono<Void> verified() {
        CompletableFuture<Void> gate = verified;
        return gate.isDone() ? Mono.empty() : Mono.fromFuture(gate, true);
    }

    @Override
    public final ServerInfo serverOf(RedisClusterReactiveCommands<String, String> r) {
        ServerInfo info = identities.get(r);
        return info != null ? info : ServerInfo.UNKNOWN;
    }

    @Override
    public final void discardAcknowledged(RedisClusterReactiveCommands<String, String> r) {
        C current = acknowledged.current();
        if (current != null && reactive(current) == r) {
            acknowledged.discard(current);
        }
    }

    private CompletableFuture<C> inspect(C connection) {
        RedisClusterReactiveCommands<String, String> r = reactive(connection);
        return read(r)
                .doOnNext(info -> {
                    identities.put(r, info);
                    ServerInfo earlier = server;
                    if (info != ServerInfo.UNKNOWN) {
                        server = info;
                    }
                    // A connection that replaced a closed one (a shared client without auto-reconnect), or the
                    // second of the two connections that opens on another server, is a reconnect too.
                    String change = cluster() || info == ServerInfo.UNKNOWN ? "" : info.identityChangeFrom(earlier);
                    if (checked.compareAndSet(false, true) || !change.isEmpty()) {
                        ServerChecks.warnIfUnsafe(r, info, keyPrefix);
                    }
                    if (!change.isEmpty()) {
                        log.warn("The Redis server for locks changed ({}): it may have lost every lock, so every lease "
                                + "held there is reported lost", change);
                        listener.serverChanged(change);
                    }
                })
                .thenReturn(connection)
                .toFuture();
    }

    /** INFO of the server, or {@link ServerInfo#UNKNOWN} when it cannot be read. */
    private Mono<ServerInfo> read(RedisClusterReactiveCommands<String, String> r) {
        // One INFO per section: servers before Redis 7 take only one.
        return Mono.zip(r.info("server"), r.info("replication"), (a, b) -> a + "\n" + b)
                .map(ServerInfo::parse)
                .timeout(INSPECT_TIMEOUT)
                .onErrorResume(e -> {
                    if (RedisErrors.noPermission(e) && infoRefusalWarned.compareAndSet(false, true)) {
                        log.warn("The Redis user may not run INFO ({}): the client cannot tell a restarted or failed-over "
                                + "server from the one that granted its leases, so such a change loses no lease "
                                + "(SERVER_CHANGED). Allow +info (see the README's \"Redis requirements\")", e.getMessage());
                    } else {
                        log.debug("Cannot read INFO: {}", e.toString());
                    }
                    return Mono.just(ServerInfo.UNKNOWN);
                });
    }

    /**
     * After a reconnect: compares the server with the one before, and reports a change of identity before
     * {@link #verified()} lets a grant of the new server through.
     */
    private void reinspect(C connection) {
        CompletableFuture<Void> gate = new CompletableFuture<>();
        verified = gate;
        ServerInfo earlier = server;
        RedisClusterReactiveCommands<String, String> r = reactive(connection);
        read(r).subscribe(info -> {
            try {
                identities.put(r, info);
                if (info != ServerInfo.UNKNOWN) {
                    server = info;
                    String change = info.identityChangeFrom(earlier);
                    if (!change.isEmpty()) {
                        log.warn("The Redis server for locks changed after a reconnect ({}): it may have lost every lock, "
                                + "so every lease held there is reported lost", change);
                        listener.serverChanged(change);
                    }
                }
            } finally {
                gate.complete(null);
            }
        }, e -> gate.complete(null), () -> gate.complete(null));
    }

    @Override
    public final Mono<Void> close() {
        client.removeListener(reconnects);
        verified.complete(null);
        Mono<Void> connections = Mono.when(commands.close(), acknowledged.close(), pubSub.close());
        if (!ownsClient) {
            return connections;
        }
        // The client was given its resources (LockClientResources), so its shutdown leaves them: shut them down after it.
        // Whatever happens to the client's shutdown (a failure, close's own time bound), the resources' threads end.
        return connections.onErrorResume(e -> Mono.empty())
                .then(Mono.fromFuture(() -> client.shutdownAsync(0, 2, TimeUnit.SECONDS), true))
                .onErrorResume(e -> {
                    log.debug("Shutting down the Redis client failed: {}", e.toString());
                    return Mono.empty();
                })
                .doFinally(signal -> client.getResources().shutdown(0, 2, TimeUnit.SECONDS));
    }

    /**
     * Sets the options every client owned by a store has: reconnect automatically, but reject commands while
     * disconnected (a lock command must never wait in a reconnect buffer), time out after the command
     * timeout, and connect within {@link #connectTimeout(Duration)}.
     *
     * @param builder the options builder of a standalone or cluster client
     * @param commandTimeout the command timeout
     * @param <B> the builder type
     * @return the builder
     */
    static <B extends ClientOptions.Builder> B lockClientOptions(B builder, Duration commandTimeout) {
        builder.autoReconnect(true);
        builder.disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS);
        builder.timeoutOptions(TimeoutOptions.enabled(commandTimeout));
        builder.socketOptions(SocketOptions.builder().connectTimeout(ClientSettings.connectTimeout(commandTimeout)).build());
        return builder;
    }
}
