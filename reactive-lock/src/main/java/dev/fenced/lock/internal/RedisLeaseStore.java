package dev.fenced.lock.internal;

import dev.fenced.lock.LockServiceException;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisNoScriptException;
import io.lettuce.core.RedisURI;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SocketOptions;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.reactive.RedisReactiveCommands;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * The lease store on Redis or Valkey, through Lettuce's reactive API.
 *
 * <p>One command connection carries every lock command (pipelined by Lettuce); one pub/sub connection,
 * opened when the first waiter needs it, carries release notifications, with one channel subscription
 * per watched lock, reference-counted. Scripts run with {@code EVALSHA} and fall back to {@code EVAL} on
 * {@code NOSCRIPT} (the script cache is lost on restart, failover and {@code SCRIPT FLUSH}). Every
 * command fails fast while disconnected and times out after the command timeout.
 *
 * <p>Thread-safe.
 */
public final class RedisLeaseStore implements LeaseStore {

    private static final Logger log = Loggers.getLogger(RedisLeaseStore.class);

    /** Leases renewed by one script call at most, so that one call never holds Redis for long. */
    static final int MAX_RENEW_BATCH = 256;

    private final RedisClient client;
    private final boolean ownsClient;
    private final KeyLayout keys;
    private final Duration commandTimeout;
    private final Duration connectTimeout;
    private final Scheduler scheduler;
    private final LazyConnection<StatefulRedisConnection<String, String>> commands;
    private final LazyConnection<StatefulRedisPubSubConnection<String, String>> pubSub;
    private final Map<String, ChannelWatch> watches = new ConcurrentHashMap<>();
    // Read here, on the thread that builds the client: reading resources on an event loop would block it.
    private final LuaScript acquireScript = LuaScript.ACQUIRE;
    private final LuaScript renewScript = LuaScript.RENEW;
    private final LuaScript releaseScript = LuaScript.RELEASE;

    private RedisLeaseStore(RedisClient client, boolean ownsClient, RedisURI uri, ClientSettings settings) {
        this.client = client;
        this.ownsClient = ownsClient;
        this.keys = new KeyLayout(settings.keyPrefix());
        this.commandTimeout = settings.commandTimeout();
        this.connectTimeout = connectTimeout(settings);
        this.scheduler = settings.scheduler();
        this.commands = new LazyConnection<>(() -> client.connectAsync(StringCodec.UTF8, uri).toCompletableFuture()
                .thenApply(this::checkServer));
        this.pubSub = new LazyConnection<>(() -> client.connectPubSubAsync(StringCodec.UTF8, uri).toCompletableFuture()
                .thenApply(this::listen));
    }

    /**
     * A store on a Lettuce client it creates and owns: commands are rejected while disconnected (never
     * buffered), and time out after the command timeout.
     *
     * @param uri the server
     * @param settings the client settings
     * @return the store
     */
    public static RedisLeaseStore owned(RedisURI uri, ClientSettings settings) {
        RedisClient client = RedisClient.create(uri);
        client.setOptions(ClientOptions.builder()
                .autoReconnect(true)
                .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
                .timeoutOptions(TimeoutOptions.enabled(settings.commandTimeout()))
                .socketOptions(SocketOptions.builder().connectTimeout(connectTimeout(settings)).build())
                .build());
        return new RedisLeaseStore(client, true, uri, settings);
    }

    /**
     * How long connecting (on first use, or after the connection was lost) may take: the command timeout,
     * but at least 5 seconds, since a connection handshake on a busy machine can take longer than a command.
     */
    static Duration connectTimeout(ClientSettings settings) {
        Duration floor = Duration.ofSeconds(5);
        return settings.commandTimeout().compareTo(floor) > 0 ? settings.commandTimeout() : floor;
    }

    /**
     * A store on a Lettuce client shared with the application, which keeps its own options; lock
     * commands still fail fast while the connection is down and time out after the command timeout.
     *
     * @param client the Lettuce client, left open on close
     * @param uri the server
     * @param settings the client settings
     * @return the store
     */
    public static RedisLeaseStore shared(RedisClient client, RedisURI uri, ClientSettings settings) {
        return new RedisLeaseStore(client, false, uri, settings);
    }

    @Override
    public Mono<AcquireReply> acquire(String name, String owner, long leaseMillis, long floor) {
        String[] scriptKeys = {keys.lockKey(name), keys.fenceKey(name)};
        String[] args = {owner, Long.toString(leaseMillis), Long.toString(floor)};
        return evalList(acquireScript, scriptKeys, args, name, "acquire")
                .map(reply -> reply.get(0) == 1L ? AcquireReply.acquired(reply.get(1)) : AcquireReply.busy(reply.get(1)));
    }

    @Override
    public Mono<List<Boolean>> renew(List<RenewRequest> leases) {
        if (leases.isEmpty()) {
            return Mono.just(List.of());
        }
        List<Mono<List<Boolean>>> batches = new ArrayList<>();
        for (int from = 0; from < leases.size(); from += MAX_RENEW_BATCH) {
            batches.add(renewBatch(leases.subList(from, Math.min(leases.size(), from + MAX_RENEW_BATCH))));
        }
        // Lettuce pipelines the batches on the one connection; the replies come back in order.
        return Flux.mergeSequential(batches)
                .flatMapIterable(part -> part)
                .collectList();
    }

    private Mono<List<Boolean>> renewBatch(List<RenewRequest> batch) {
        String[] scriptKeys = new String[batch.size()];
        String[] args = new String[batch.size() * 2];
        for (int i = 0; i < batch.size(); i++) {
            RenewRequest r = batch.get(i);
            scriptKeys[i] = keys.lockKey(r.name());
            args[2 * i] = Long.toString(r.leaseMillis());
            args[2 * i + 1] = r.owner() + ":" + r.token();
        }
        String what = batch.size() == 1 ? batch.get(0).name() : "";
        return evalList(renewScript, scriptKeys, args, what, "renew " + batch.size() + " lease(s)")
                .map(reply -> {
                    List<Boolean> held = new ArrayList<>(reply.size());
                    for (Long r : reply) {
                        held.add(r == 1L);
                    }
                    return held;
                });
    }

    @Override
    public Mono<Boolean> release(String name, String owner, @Nullable Long token) {
        String[] scriptKeys = {keys.lockKey(name)};
        String[] args = {owner, token == null ? "" : token.toString(), keys.releaseChannel(name)};
        return command(name, "release", r -> eval(r, releaseScript, ScriptOutputType.INTEGER, scriptKeys, args))
                .map(deleted -> Long.valueOf(1L).equals(deleted));
    }

    @Override
    public Mono<Void> ping() {
        return command("", "ping", RedisReactiveCommands::ping).then();
    }

    private Mono<List<Long>> evalList(LuaScript script, String[] scriptKeys, String[] args, String name, String operation) {
        // A MULTI reply arrives as one element: the whole array.
        return command(name, operation, r -> this.<List<Long>>eval(r, script, ScriptOutputType.MULTI, scriptKeys, args))
                .defaultIfEmpty(List.of());
    }

    /** {@code EVALSHA}, falling back to {@code EVAL} when the server lost its script cache. */
    private static <T> Mono<T> eval(RedisReactiveCommands<String, String> r, LuaScript script, ScriptOutputType type,
            String[] scriptKeys, String[] args) {
        return r.<T>evalsha(script.sha1(), type, scriptKeys, args)
                .onErrorResume(RedisNoScriptException.class, e -> r.eval(script.source(), type, scriptKeys, args))
                .next();
    }

    /**
     * The one path of every command: connect (within the connect timeout), refuse to queue while
     * disconnected, time out after the command timeout, and classify failures.
     */
    private <T> Mono<T> command(String name, String operation, Function<RedisReactiveCommands<String, String>, Mono<T>> body) {
        return connection(name, operation)
                .flatMap(c -> {
                    failIfDisconnected(c, name, operation);
                    return body.apply(c.reactive()).timeout(commandTimeout, scheduler);
                })
                .onErrorMap(e -> RedisErrors.classify(e, name, operation, commandTimeout));
    }

    private Mono<StatefulRedisConnection<String, String>> connection(String name, String operation) {
        return commands.get()
                .timeout(connectTimeout, scheduler)
                .onErrorMap(java.util.concurrent.TimeoutException.class, e -> LockServiceException.of(name, operation,
                        "cannot connect to Redis within " + connectTimeout.toMillis() + " ms", e));
    }

    private static void failIfDisconnected(StatefulRedisConnection<String, String> c, String name, String operation) {
        // A lock command must never wait in a reconnect buffer: by the time it is sent the lease may be gone.
        if (!c.isOpen()) {
            throw LockServiceException.of(name, operation, "not connected to Redis (reconnecting)", null);
        }
    }

    @Override
    public Flux<Long> releases(String name) {
        String channel = keys.releaseChannel(name);
        return pubSub.get().timeout(connectTimeout, scheduler).flatMapMany(connection -> {
            ChannelWatch watch;
            synchronized (watches) {
                watch = watches.get(channel);
                if (watch == null) {
                    watch = new ChannelWatch();
                    // Sent under the lock so that SUBSCRIBE and UNSUBSCRIBE of a channel go out in order.
                    watch.confirmed = connection.reactive().subscribe(channel)
                            .timeout(commandTimeout, scheduler)
                            .cache();
                    watch.confirmed.subscribe(null, e -> log.debug("SUBSCRIBE {} failed: {}", channel, e.toString()));
                    watches.put(channel, watch);
                }
                watch.refs++;
            }
            ChannelWatch w = watch;
            return w.confirmed.thenMany(w.counts.asFlux()).doFinally(signal -> unwatch(connection, channel, w));
        });
    }

    private void unwatch(StatefulRedisPubSubConnection<String, String> connection, String channel, ChannelWatch watch) {
        synchronized (watches) {
            if (--watch.refs == 0 && watches.remove(channel, watch)) {
                connection.reactive().unsubscribe(channel)
                        .subscribe(null, e -> log.debug("UNSUBSCRIBE {} failed: {}", channel, e.toString()));
            }
        }
    }

    private StatefulRedisPubSubConnection<String, String> listen(StatefulRedisPubSubConnection<String, String> connection) {
        connection.addListener(new RedisPubSubAdapter<>() {
            @Override
            public void message(String channel, String message) {
                ChannelWatch watch = watches.get(channel);
                if (watch != null) {
                    watch.notifyRelease();
                }
            }
        });
        return connection;
    }

    private StatefulRedisConnection<String, String> checkServer(StatefulRedisConnection<String, String> connection) {
        // Lock and counter keys must never be evicted; CONFIG may be disabled on managed services.
        // One parameter per CONFIG GET: servers before Redis 7 take only one.
        Mono.zip(connection.reactive().configGet("maxmemory-policy"), connection.reactive().configGet("maxmemory"))
                .subscribe(config -> {
                    String policy = config.getT1().getOrDefault("maxmemory-policy", "noeviction");
                    String maxmemory = config.getT2().getOrDefault("maxmemory", "0");
                    if (!"noeviction".equals(policy) && !"0".equals(maxmemory)) {
                        log.warn("Redis maxmemory-policy is '{}' with maxmemory {}: under memory pressure Redis may evict "
                                + "lock keys (a lease silently ends) or token counters (tokens restart). Set "
                                + "maxmemory-policy to noeviction for the keys prefixed '{}'.", policy, maxmemory, keys.prefix());
                    }
                }, e -> log.debug("Cannot read the eviction policy (CONFIG GET not allowed?): {}", e.toString()));
        return connection;
    }

    @Override
    public Mono<Void> close() {
        Mono<Void> connections = Mono.when(commands.close(), pubSub.close());
        if (!ownsClient) {
            return connections;
        }
        return connections.then(Mono.fromFuture(() -> client.shutdownAsync(0, 2, TimeUnit.SECONDS), true))
                .onErrorResume(e -> {
                    log.debug("Shutting down the Redis client failed: {}", e.toString());
                    return Mono.empty();
                });
    }

    /** The watchers of one channel. Guarded by {@code watches}, except the counts. */
    private static final class ChannelWatch {

        private final AtomicLong count = new AtomicLong();
        private final Sinks.Many<Long> counts = Sinks.many().replay().latest();
        private Mono<Void> confirmed = Mono.empty();
        private int refs;

        ChannelWatch() {
            counts.tryEmitNext(0L);
        }

        void notifyRelease() {
            // Messages of one channel arrive on the pub/sub connection's single event-loop thread.
            counts.tryEmitNext(count.incrementAndGet());
        }
    }
}
