package dev.fenced.lock.internal.redis;

import dev.fenced.lock.TokenScheme;
import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.lock.internal.KeyLayout;
import dev.fenced.lock.internal.LeaseStore;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.cluster.api.reactive.RedisClusterReactiveCommands;
import java.time.Duration;
import java.util.List;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * The lease store on Redis or Valkey, through Lettuce's reactive API: one server (directly or through
 * Sentinel) or a Redis Cluster. It maps the store's operations onto the Lua scripts beside it and leaves
 * each concern to one piece: running a command ({@link RedisCommands}), routing renewals over a cluster
 * ({@link RenewalRouter}), release-notification subscriptions ({@link ReleaseWatches}), replica
 * acknowledgement ({@link AcknowledgedAcquire}), and the connections with their server checks
 * ({@link RedisConnections}).
 *
 * <p>Thread-safe.
 */
public final class RedisLeaseStore implements LeaseStore {

    private final RedisConnections connections;
    private final KeyLayout keys;
    private final RedisCommands commands;
    private final RenewalRouter renewals;
    private final ReleaseWatches watches;
    private final ReplicaAcks acks;
    private final boolean serverTimeTokens;
    private final Sinks.Many<String> serverChanges = Sinks.many().multicast().directBestEffort();
    // Read here, on the thread that builds the client: reading resources on an event loop would block it.
    private final LuaScript acquireScript = LuaScript.ACQUIRE;
    private final LuaScript releaseScript = LuaScript.RELEASE;
    private final AcknowledgedAcquire acknowledged;

    private RedisLeaseStore(ClientSettings settings, ReplicaAcks acks,
            Function<RedisConnections.Listener, RedisConnections> connect) {
        this.keys = new KeyLayout(settings.keyPrefix());
        this.acks = acks;
        this.serverTimeTokens = settings.tokenScheme() == TokenScheme.SERVER_TIME;
        // The listener is called only once the connections exist, so it may reach the watches.
        ReleaseWatches[] watchesOnceBuilt = new ReleaseWatches[1];
        this.connections = connect.apply(new RedisConnections.Listener() {
            @Override
            public void released(String channel) {
                watchesOnceBuilt[0].onRelease(channel);
            }

            @Override
            public void unsubscribed(String channel) {
                watchesOnceBuilt[0].resubscribe(channel);
            }

            @Override
            public void serverChanged(String change) {
                serverChanges.emitNext(change, Sinks.EmitFailureHandler.busyLooping(Duration.ofMillis(100)));
            }
        });
        // Timeouts fire on the loss scheduler: the errors they raise reach application code, never the renewal thread.
        this.commands = new RedisCommands(connections, settings.commandTimeout(), settings.lossScheduler());
        this.renewals = new RenewalRouter(commands, connections, keys);
        this.watches = new ReleaseWatches(connections, commands, keys, settings.scheduler());
        watchesOnceBuilt[0] = watches;
        this.acknowledged = new AcknowledgedAcquire(commands, connections, acks, acquireScript, this::release);
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
        Mono<AcquireReply> reply = acks.required()
                ? acknowledged.acquire(name, owner, lockKey, scriptKeys, args, RedisLeaseStore::acquireReply)
                : commands.evalList(acquireScript, scriptKeys, args, name, "acquire").map(RedisLeaseStore::acquireReply);
        return reply.flatMap(this::verified);
    }

    /**
     * One script call: the acquire script, told that a lock holding {@code owner:token} counts as free. It takes
     * the lock over for {@code nextOwner} without a release notification. With replica acknowledgement the
     * default two steps run instead (the acknowledged acquire has a connection of its own).
     */
    @Override
    public Mono<Handoff> handOff(String name, String owner, long token, String nextOwner, long leaseMillis, long floor) {
        if (acks.required()) {
            return LeaseStore.super.handOff(name, owner, token, nextOwner, leaseMillis, floor);
        }
        String[] scriptKeys = {keys.lockKey(name), keys.fenceKey(name)};
        String[] args = {nextOwner, Long.toString(leaseMillis), Long.toString(floor), serverTimeTokens ? "1" : "", owner,
                Long.toString(token)};
        return commands.evalList(acquireScript, scriptKeys, args, name, "release")
                .flatMap(reply -> {
                    boolean released = reply.size() > 2 && reply.get(2) == 1L;
                    return verified(acquireReply(reply)).map(next -> new Handoff(released, next, null));
                });
    }

    /** A grant, once a change of server found after a reconnect has been reported (at once while connected). */
    private Mono<AcquireReply> verified(AcquireReply reply) {
        return reply.acquired() ? connections.verified().thenReturn(reply) : Mono.just(reply);
    }

    private static AcquireReply acquireReply(List<Long> reply) {
        return reply.get(0) == 1L ? AcquireReply.acquired(reply.get(1)) : AcquireReply.busy(reply.get(1));
    }

    @Override
    public Mono<List<Boolean>> renew(List<RenewRequest> leases) {
        return renewals.renew(leases);
    }

    @Override
    public Mono<Boolean> release(String name, String owner, @Nullable Long token) {
        String[] scriptKeys = {keys.lockKey(name)};
        return commands.command(name, "release", r -> {
            String[] args = {owner, token == null ? "" : token.toString(), keys.releaseChannel(name),
                    connections.shardedPubSub() ? "1" : ""};
            return RedisCommands.<Long>eval(r, releaseScript, ScriptOutputType.INTEGER, scriptKeys, args);
        }).map(deleted -> Long.valueOf(1L).equals(deleted));
    }

    @Override
    public Flux<Long> releases(String name) {
        return watches.releases(name);
    }

    @Override
    public Flux<String> serverChanges() {
        return serverChanges.asFlux();
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
        return commands.command("", "ping", RedisClusterReactiveCommands::ping).then();
    }

    @Override
    public Mono<Void> close() {
        watches.close();
        return connections.close();
    }
}
