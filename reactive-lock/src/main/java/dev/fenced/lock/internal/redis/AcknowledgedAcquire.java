package dev.fenced.lock.internal.redis;

import dev.fenced.lock.LockServiceException;
import dev.fenced.lock.ReplicaAcknowledgementException;
import dev.fenced.lock.internal.LeaseStore.AcquireReply;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.cluster.api.reactive.RedisClusterReactiveCommands;
import java.util.List;
import java.util.function.Function;
import reactor.core.publisher.Mono;

/**
 * An acquire that replicas must acknowledge: the acquire script and then {@code WAIT} on a connection of its
 * own to the lock's node ({@code WAIT} counts the replicas that have this connection's last write, and holds
 * the connection while it waits, so it must not delay renewals). When too few replicas acknowledge in time,
 * the lock is released again and the acquire fails with {@link ReplicaAcknowledgementException}: the lock is
 * free when the error arrives. Thread-safe.
 */
final class AcknowledgedAcquire {

    private final RedisCommands commands;
    private final RedisConnections connections;
    private final ReplicaAcks acks;
    private final LuaScript acquireScript;
    private final Releaser releaser;

    /** Releases a lock by owner and token (the store's owner-checked release). */
    interface Releaser {
        Mono<Boolean> release(String name, String owner, long token);
    }

    AcknowledgedAcquire(RedisCommands commands, RedisConnections connections, ReplicaAcks acks, LuaScript acquireScript,
            Releaser releaser) {
        this.commands = commands;
        this.connections = connections;
        this.acks = acks;
        this.acquireScript = acquireScript;
        this.releaser = releaser;
    }

    Mono<AcquireReply> acquire(String name, String owner, String lockKey, String[] scriptKeys, String[] args,
            Function<List<Object>, AcquireReply> parse) {
        return commands.run(name, "acquire", connections.acknowledgedCommandsAt(lockKey), r -> RedisCommands.<List<Object>>eval(
                        r, acquireScript, ScriptOutputType.MULTI, scriptKeys, args)
                .map(parse)
                .flatMap(reply -> !reply.acquired() ? Mono.just(reply)
                        : r.waitForReplication(acks.replicas(), acks.timeout().toMillis())
                                .flatMap(acknowledged -> acknowledged >= acks.replicas() ? grantedByCurrent(r, reply, name)
                                        : unacknowledged(name, owner, reply.token(), acknowledged))),
                commands.commandTimeout().plus(acks.timeout()));
    }

    /**
     * The grant, if the server that made it is still the lock service's once any change of server has been
     * reported. A grant of an old server (this connection still reached it after the other found a new one) is
     * not a lease: it fails, the undo frees what it can, and the next acquire connects anew.
     */
    private Mono<AcquireReply> grantedByCurrent(RedisClusterReactiveCommands<String, String> r, AcquireReply reply,
            String name) {
        if (connections.cluster()) {
            return Mono.just(reply); // each node has an identity of its own; a cluster's are not compared
        }
        return connections.verified().then(Mono.defer(() -> {
            String change = connections.server().identityChangeFrom(connections.serverOf(r));
            if (change.isEmpty()) {
                return Mono.just(reply);
            }
            connections.discardAcknowledged(r);
            return Mono.error(LockServiceException.of(name, "acquire", "granted by a server that is no longer the lock "
                    + "service's (" + change + "); not a lease, try again", null));
        }));
    }

    /** Releases an acquire too few replicas acknowledged, then fails with that. */
    private Mono<AcquireReply> unacknowledged(String name, String owner, long token, long acknowledged) {
        ReplicaAcknowledgementException error = ReplicaAcknowledgementException.of(name, acknowledged, acks.replicas(), acks.timeout());
        return releaser.release(name, owner, token)
                .onErrorResume(e -> {
                    error.addSuppressed(e);
                    return Mono.empty();
                })
                .then(Mono.error(error));
    }
}
