package dev.fenced.lock.internal.redis;

import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.lock.internal.KeyLayout;
import dev.fenced.lock.internal.LeaseStore;
import dev.fenced.lock.LockServiceException;
import dev.fenced.lock.ReplicaAcknowledgementException;
import dev.fenced.lock.TokenScheme;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisNoScriptException;
import io.lettuce.core.RedisURI;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.SlotHash;
import io.lettuce.core.cluster.api.reactive.RedisClusterReactiveCommands;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
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
 * The lease store on Redis or Valkey, through Lettuce's reactive API: one server (directly or through
 * Sentinel) or a Redis Cluster.
 *
 * <p>One command connection carries every lock command (pipelined by Lettuce; routed by slot on a
 * cluster); one pub/sub connection, opened when the first waiter needs it, carries release notifications,
 * with one channel subscription per watched lock, reference-counted. Scripts run with {@code EVALSHA} and
 * fall back to {@code EVAL} on {@code NOSCRIPT} (the script cache is lost on restart, failover, reshard
 * and {@code SCRIPT FLUSH}). Every command fails fast while disconnected and times out after the command
 * timeout. Renewals go in batches of up to {@value #MAX_RENEW_BATCH} leases: on a cluster, one batch per
 * node (Redis 7 and later) or per slot. With {@linkplain ReplicaAcks replica acknowledgement} required, an
 * acquire is followed by {@code WAIT} on a connection of its own.
 *
 * <p>Thread-safe.
 */
public final class RedisLeaseStore implements LeaseStore {

    private static final Logger log = Loggers.getLogger(RedisLeaseStore.class);

    /** Leases renewed by one script call at most, so that one call never holds Redis for long. */
    static final int MAX_RENEW_BATCH = 256;

    private final RedisConnections connections;
    private final KeyLayout keys;
    private final Duration commandTimeout;
    private final Duration connectTimeout;
    private final Scheduler scheduler;
    private final ReplicaAcks acks;
    private final boolean serverTimeTokens;
    private final Map<String, ChannelWatch> watches = new ConcurrentHashMap<>();
    private final Sinks.Many<String> serverChanges = Sinks.many().multicast().directBestEffort();
    // Pub/sub commands, one at a time in the order they were queued (under the watches lock).
    private final Sinks.Many<Mono<Void>> pubSubCommands = Sinks.many().unicast().onBackpressureBuffer();
    private final reactor.core.Disposable pubSubWorker = pubSubCommands.asFlux()
            .concatMap(command -> command.onErrorResume(e -> Mono.empty()), 1)
            .subscribe();
    // Read here, on the thread that builds the client: reading resources on an event loop would block it.
    private final LuaScript acquireScript = LuaScript.ACQUIRE;
    private final LuaScript renewScript = LuaScript.RENEW;
    private final LuaScript renewOnNodeScript = LuaScript.RENEW_ON_NODE;
    private final LuaScript releaseScript = LuaScript.RELEASE;

    private RedisLeaseStore(ClientSettings settings, ReplicaAcks acks,
            java.util.function.Function<RedisConnections.Listener, RedisConnections> connect) {
        this.keys = new KeyLayout(settings.keyPrefix());
        this.commandTimeout = settings.commandTimeout();
        this.connectTimeout = BaseConnections.connectTimeout(settings.commandTimeout());
        this.scheduler = settings.scheduler();
        this.acks = acks;
        this.serverTimeTokens = settings.tokenScheme() == TokenScheme.SERVER_TIME;
        this.connections = connect.apply(new RedisConnections.Listener() {
            @Override
            public void released(String channel) {
                onRelease(channel);
            }

            @Override
            public void unsubscribed(String channel) {
                resubscribe(channel);
            }

            @Override
            public void serverChanged(String change) {
                serverChanges.tryEmitNext(change);
            }
        });
    }

    /**
     * A store on the given deployment. A Lettuce client the store creates rejects commands while
     * disconnected (never buffers them) and times them out after the command timeout; a shared client keeps
     * its own options, and the store still fails fast while disconnected and times commands out itself.
     *
     * @param target the deployment and who owns its Lettuce client
     * @param settings the client settings
     * @param acks the replica acknowledgement required of an acquire
     * @return the store
     */
    public static RedisLeaseStore open(RedisTarget target, ClientSettings settings, ReplicaAcks acks) {
        Duration timeout = settings.commandTimeout();
        String prefix = settings.keyPrefix();
        return new RedisLeaseStore(settings, acks, listener -> {
            // One case per kind of target (a switch over the sealed type needs Java 21).
            if (target instanceof RedisTarget.Server server) {
                return StandaloneConnections.owned(server.uri(), timeout, prefix, listener);
            }
            if (target instanceof RedisTarget.SharedServer shared) {
                return StandaloneConnections.shared(shared.client(), shared.uri(), prefix, listener);
            }
            if (target instanceof RedisTarget.Cluster cluster) {
                return ClusterConnections.owned(cluster.seeds(), timeout, prefix, listener);
            }
            return ClusterConnections.shared(((RedisTarget.SharedCluster) target).client(), prefix, listener);
        });
    }

    @Override
    public Mono<AcquireReply> acquire(String name, String owner, long leaseMillis, long floor) {
        String lockKey = keys.lockKey(name);
        String[] scriptKeys = {lockKey, keys.fenceKey(name)};
        String[] args = {owner, Long.toString(leaseMillis), Long.toString(floor), serverTimeTokens ? "1" : ""};
        if (!acks.required()) {
            return evalList(acquireScript, scriptKeys, args, name, "acquire").map(RedisLeaseStore::acquireReply)
                    .flatMap(this::verified);
        }
        // The script and WAIT on one connection: WAIT counts the replicas that have this client's last write.
        return run(name, "acquire", connections.acknowledgedCommandsAt(lockKey), r -> this.<List<Long>>eval(
                        r, acquireScript, ScriptOutputType.MULTI, scriptKeys, args)
                .map(RedisLeaseStore::acquireReply)
                .flatMap(reply -> !reply.acquired() ? Mono.just(reply)
                        : r.waitForReplication(acks.replicas(), acks.timeout().toMillis())
                                .flatMap(acknowledged -> acknowledged >= acks.replicas() ? Mono.just(reply)
                                        : unacknowledged(name, owner, reply.token(), acknowledged))),
                commandTimeout.plus(acks.timeout()))
                .flatMap(this::verified);
    }

    /** A grant, once a change of server found after a reconnect has been reported (at once while connected). */
    private Mono<AcquireReply> verified(AcquireReply reply) {
        return reply.acquired() ? connections.verified().thenReturn(reply) : Mono.just(reply);
    }

    @Override
    public Flux<String> serverChanges() {
        return serverChanges.asFlux();
    }

    /** Releases an acquire too few replicas acknowledged, then fails with that: the lock is free when the error arrives. */
    private Mono<AcquireReply> unacknowledged(String name, String owner, long token, long acknowledged) {
        ReplicaAcknowledgementException error = ReplicaAcknowledgementException.of(name, acknowledged, acks.replicas(), acks.timeout());
        return release(name, owner, token)
                .onErrorResume(e -> {
                    error.addSuppressed(e);
                    return Mono.empty();
                })
                .then(Mono.error(error));
    }

    private static AcquireReply acquireReply(List<Long> reply) {
        return reply.get(0) == 1L ? AcquireReply.acquired(reply.get(1)) : AcquireReply.busy(reply.get(1));
    }

    @Override
    public Mono<List<Boolean>> renew(List<RenewRequest> leases) {
        if (leases.isEmpty()) {
            return Mono.just(List.of());
        }
        Boolean[] held = new Boolean[leases.size()];
        List<Mono<Void>> batches = new ArrayList<>();
        for (List<Integer> group : groups(leases)) {
            for (int from = 0; from < group.size(); from += MAX_RENEW_BATCH) {
                List<Integer> batch = group.subList(from, Math.min(group.size(), from + MAX_RENEW_BATCH));
                batches.add(renewGroup(leases, batch).doOnNext(replies -> {
                    for (int i = 0; i < batch.size(); i++) {
                        held[batch.get(i)] = replies.get(i);
                    }
                }).then());
            }
        }
        // Lettuce pipelines the batches on the one connection.
        return Flux.mergeSequential(batches).then(Mono.fromSupplier(() -> {
            List<Boolean> result = new ArrayList<>(held.length);
            for (Boolean h : held) {
                result.add(Boolean.TRUE.equals(h));
            }
            return result;
        }));
    }

    /**
     * The leases (as indices) that can share one script call: on one server, all; on a cluster of Redis 7
     * or later, those on one node; on an older cluster, those in one slot.
     */
    private Collection<List<Integer>> groups(List<RenewRequest> leases) {
        Map<Object, List<Integer>> groups = new LinkedHashMap<>();
        boolean byNode = connections.cluster() && connections.server().atLeast(7);
        for (int i = 0; i < leases.size(); i++) {
            String key = keys.lockKey(leases.get(i).name());
            Object group = !connections.cluster() ? "" : byNode ? connections.nodeOf(key) : SlotHash.getSlot(key);
            groups.computeIfAbsent(group, g -> new ArrayList<>()).add(i);
        }
        return groups.values();
    }

    private Mono<List<Boolean>> renewGroup(List<RenewRequest> leases, List<Integer> batch) {
        if (!connections.cluster()) {
            return renewInSlot(leases, batch);
        }
        if (!connections.server().atLeast(7)) {
            return renewPerSlot(leases, batch);
        }
        return renewOnNode(leases, batch);
    }

    /** One call for leases of several slots of one cluster node; what it cannot settle goes slot by slot. */
    private Mono<List<Boolean>> renewOnNode(List<RenewRequest> leases, List<Integer> batch) {
        String[] args = new String[batch.size() * 3];
        for (int i = 0; i < batch.size(); i++) {
            RenewRequest r = leases.get(batch.get(i));
            args[3 * i] = Long.toString(r.leaseMillis());
            args[3 * i + 1] = r.owner() + ":" + r.token();
            args[3 * i + 2] = keys.lockKey(r.name());
        }
        String[] scriptKeys = {args[2]};
        return evalList(renewOnNodeScript, scriptKeys, args, "", "renew " + batch.size() + " lease(s)")
                .flatMap(reply -> {
                    List<Integer> missing = new ArrayList<>();
                    for (int i = 0; i < batch.size(); i++) {
                        if (i >= reply.size() || reply.get(i) == 2L) {
                            missing.add(batch.get(i));
                        }
                    }
                    if (missing.isEmpty()) {
                        return Mono.just(reply.stream().map(r -> r == 1L).toList());
                    }
                    // Expired, or moved by a reshard: ask the slot's owner, following redirections.
                    return renewPerSlot(leases, missing).map(again -> {
                        List<Boolean> held = new ArrayList<>(batch.size());
                        int next = 0;
                        for (int i = 0; i < batch.size(); i++) {
                            held.add(i < reply.size() && reply.get(i) != 2L ? reply.get(i) == 1L : again.get(next++));
                        }
                        return held;
                    });
                })
                // A key no longer on the node (the topology changed under us): go slot by slot.
                .onErrorResume(LockServiceException.class, e -> e.getCause() instanceof RedisCommandExecutionException
                        ? renewPerSlot(leases, batch) : Mono.error(e));
    }

    /** One call per slot, in the order of {@code batch}. */
    private Mono<List<Boolean>> renewPerSlot(List<RenewRequest> leases, List<Integer> batch) {
        Map<Integer, List<Integer>> slots = new LinkedHashMap<>();
        for (int index : batch) {
            slots.computeIfAbsent(SlotHash.getSlot(keys.lockKey(leases.get(index).name())), s -> new ArrayList<>()).add(index);
        }
        Map<Integer, Boolean> held = new ConcurrentHashMap<>();
        return Flux.fromIterable(slots.values())
                .flatMapSequential(inSlot -> renewInSlot(leases, inSlot).doOnNext(replies -> {
                    for (int i = 0; i < inSlot.size(); i++) {
                        held.put(inSlot.get(i), replies.get(i));
                    }
                }))
                .then(Mono.fromSupplier(() -> batch.stream().map(i -> held.getOrDefault(i, false)).toList()));
    }

    /** One call with every lock key declared: they must share a slot on a cluster. */
    private Mono<List<Boolean>> renewInSlot(List<RenewRequest> leases, List<Integer> batch) {
        String[] scriptKeys = new String[batch.size()];
        String[] args = new String[batch.size() * 2];
        for (int i = 0; i < batch.size(); i++) {
            RenewRequest r = leases.get(batch.get(i));
            scriptKeys[i] = keys.lockKey(r.name());
            args[2 * i] = Long.toString(r.leaseMillis());
            args[2 * i + 1] = r.owner() + ":" + r.token();
        }
        String what = batch.size() == 1 ? leases.get(batch.get(0)).name() : "";
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
        return command(name, "release", r -> {
            // Decided per call: the server is known once the connection is open.
            String[] args = {owner, token == null ? "" : token.toString(), keys.releaseChannel(name),
                    connections.shardedPubSub() ? "1" : ""};
            return eval(r, releaseScript, ScriptOutputType.INTEGER, scriptKeys, args);
        }).map(deleted -> Long.valueOf(1L).equals(deleted));
    }

    @Override
    public boolean neverSent(Throwable error) {
        return RedisErrors.neverSent(error);
    }

    @Override
    public boolean onIoThread() {
        // Lettuce runs on Netty's event loops.
        return Thread.currentThread() instanceof io.netty.util.concurrent.FastThreadLocalThread;
    }

    @Override
    public Mono<Void> ping() {
        return command("", "ping", RedisClusterReactiveCommands::ping).then();
    }

    private Mono<List<Long>> evalList(LuaScript script, String[] scriptKeys, String[] args, String name, String operation) {
        // A MULTI reply arrives as one element: the whole array.
        return command(name, operation, r -> this.<List<Long>>eval(r, script, ScriptOutputType.MULTI, scriptKeys, args))
                .defaultIfEmpty(List.of());
    }

    /** {@code EVALSHA}, falling back to {@code EVAL} when the server lost its script cache. */
    private static <T> Mono<T> eval(RedisClusterReactiveCommands<String, String> r, LuaScript script, ScriptOutputType type,
            String[] scriptKeys, String[] args) {
        return r.<T>evalsha(script.sha1(), type, scriptKeys, args)
                .onErrorResume(RedisNoScriptException.class, e -> r.eval(script.source(), type, scriptKeys, args))
                .next();
    }

    /** A command on the command connection. */
    private <T> Mono<T> command(String name, String operation, Function<RedisClusterReactiveCommands<String, String>, Mono<T>> body) {
        return Mono.defer(() -> {
            RedisClusterReactiveCommands<String, String> open = connections.openCommands();
            if (open == null) {
                return run(name, operation, connections.commands(), body, commandTimeout);
            }
            // Connected (the usual case): no connect timer; and on a Lettuce client of our own, whose options
            // time every command out, no second timer either. Both would be scheduled for every command.
            Mono<T> sent = body.apply(open);
            return (connections.ownsClient() ? sent : sent.timeout(commandTimeout, scheduler))
                    .onErrorMap(e -> RedisErrors.classify(e, name, operation, commandTimeout));
        });
    }

    /**
     * The one path of every command: connect (within the connect timeout), refuse to queue while
     * disconnected, time out, and classify failures.
     */
    private <T> Mono<T> run(String name, String operation, Mono<RedisClusterReactiveCommands<String, String>> connection,
            Function<RedisClusterReactiveCommands<String, String>, Mono<T>> body, Duration timeout) {
        return connection
                .timeout(connectTimeout, scheduler)
                .onErrorMap(java.util.concurrent.TimeoutException.class, e -> LockServiceException.of(name, operation,
                        "cannot connect to Redis within " + connectTimeout.toMillis() + " ms",
                        new RedisErrors.NotConnectedException("no connection within " + connectTimeout.toMillis() + " ms")))
                .flatMap(r -> body.apply(r).timeout(timeout, scheduler))
                .onErrorMap(e -> RedisErrors.classify(e, name, operation, timeout));
    }

    @Override
    public Flux<Long> releases(String name) {
        String channel = keys.releaseChannel(name);
        return Flux.defer(() -> {
            ChannelWatch watch;
            synchronized (watches) {
                watch = watches.get(channel);
                if (watch == null) {
                    watch = new ChannelWatch();
                    watch.confirmed = inOrder(connections.subscribe(channel)
                            .timeout(connectTimeout.plus(commandTimeout), scheduler)
                            .doOnError(e -> log.debug("SUBSCRIBE {} failed: {}", channel, e.toString())));
                    watches.put(channel, watch);
                }
                watch.refs++;
            }
            ChannelWatch w = watch;
            return w.confirmed.thenMany(w.counts.asFlux()).doFinally(signal -> unwatch(channel, w));
        });
    }

    private void unwatch(String channel, ChannelWatch watch) {
        synchronized (watches) {
            if (--watch.refs == 0 && watches.remove(channel, watch)) {
                inOrder(connections.unsubscribe(channel)
                        .doOnError(e -> log.debug("UNSUBSCRIBE {} failed: {}", channel, e.toString())));
            }
        }
    }

    /**
     * The server ended a subscription we did not end (a sharded channel whose slot moved): subscribe again,
     * on the slot's new node, if someone still watches it. Notifications missed meanwhile are covered by
     * the waiters' timers.
     */
    private void resubscribe(String channel) {
        synchronized (watches) {
            if (watches.containsKey(channel)) {
                inOrder(connections.subscribe(channel)
                        .timeout(connectTimeout.plus(commandTimeout), scheduler)
                        .doOnError(e -> log.debug("Subscribing again to {} failed: {}", channel, e.toString())));
            }
        }
    }

    /**
     * Queues a pub/sub command behind the earlier ones; called under the watches lock, so commands are queued
     * in the order the watches changed. They reach the server in that order even while the pub/sub
     * connection is still opening (commands waiting for one connection would otherwise go out in any order, and
     * an UNSUBSCRIBE overtaking its SUBSCRIBE would leave a waiter deaf for good).
     *
     * @param command the command
     * @return completes when the command has
     */
    private Mono<Void> inOrder(Mono<Void> command) {
        Sinks.Empty<Void> done = Sinks.empty();
        pubSubCommands.tryEmitNext(command.doOnSuccess(nothing -> done.tryEmitEmpty()).doOnError(done::tryEmitError));
        return done.asMono();
    }

    private void onRelease(String channel) {
        ChannelWatch watch = watches.get(channel);
        if (watch != null) {
            watch.notifyRelease();
        }
    }

    @Override
    public Mono<Void> close() {
        pubSubWorker.dispose();
        return connections.close();
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
