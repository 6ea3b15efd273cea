package dev.fenced.lock.internal.redis;

import dev.fenced.lock.FencedLockException;
import dev.fenced.lock.internal.ClientSettings;
import io.lettuce.core.RedisNoScriptException;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.cluster.api.reactive.RedisClusterReactiveCommands;
import java.time.Duration;
import java.util.List;
import java.util.function.Function;
import java.util.function.Supplier;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * Running one command: the path of every command of a {@link RedisLeaseStore}. While connected, the command
 * goes straight out on the open connection; otherwise the connection is opened within the connect timeout, and a
 * connection that is down refuses the command rather than buffering it. Every command times out after its
 * timeout, scripts fall back from {@code EVALSHA} to {@code EVAL} after {@code NOSCRIPT}, and failures are
 * classified in one place ({@link RedisErrors}). A call that carries the acquires or releases of several locks
 * ({@link ScriptBatcher}) connects as a single command does ({@link #together}), and its failures are classified
 * per lock. Thread-safe.
 */
final class RedisCommands {

    private final RedisConnections connections;
    private final Duration commandTimeout;
    private final Duration connectTimeout;
    private final Scheduler scheduler;

    RedisCommands(RedisConnections connections, Duration commandTimeout, Scheduler scheduler) {
        this.connections = connections;
        this.commandTimeout = commandTimeout;
        this.connectTimeout = ClientSettings.connectTimeout(commandTimeout);
        this.scheduler = scheduler;
    }

    Duration commandTimeout() {
        return commandTimeout;
    }

    Duration connectTimeout() {
        return connectTimeout;
    }

    /**
     * A script whose MULTI reply is a list (of integers, or of integers and error texts), its arguments made when
     * the command runs, once connected (whether a cluster has sharded pub/sub is known only then). An empty reply
     * is the empty list.
     */
    <T> Mono<List<T>> evalList(LuaScript script, String[] scriptKeys, Supplier<String[]> args, String name,
            String operation) {
        // A MULTI reply arrives as one element: the whole array.
        return command(name, operation,
                        r -> RedisCommands.<List<T>>eval(r, script, ScriptOutputType.MULTI, scriptKeys, args.get()))
                .defaultIfEmpty(List.of());
    }

    /** {@code EVALSHA}, falling back to {@code EVAL} when the server lost its script cache. */
    static <T> Mono<T> eval(RedisClusterReactiveCommands<String, String> r, LuaScript script, ScriptOutputType type,
            String[] scriptKeys, String[] args) {
        return r.<T>evalsha(script.sha1(), type, scriptKeys, args)
                .onErrorResume(RedisNoScriptException.class, e -> r.eval(script.source(), type, scriptKeys, args))
                .next();
    }

    /** A command on the command connection. */
    <T> Mono<T> command(String name, String operation, Function<RedisClusterReactiveCommands<String, String>, Mono<T>> body) {
        return Mono.defer(() -> {
            RedisClusterReactiveCommands<String, String> open = connections.openCommands();
            if (open == null) {
                return run(name, operation, connections.commands(), body, commandTimeout);
            }
            return onOpen(open, body).onErrorMap(e -> classify(e, name, operation));
        });
    }

    /**
     * A command on the open connection, timed out as {@link #command} times it out; its failures are left
     * unclassified, for a caller that classifies them per lock ({@link #classify}).
     */
    <T> Mono<T> onOpen(RedisClusterReactiveCommands<String, String> open,
            Function<RedisClusterReactiveCommands<String, String>, Mono<T>> body) {
        // Connected (the usual case): no connect timer; and on a Lettuce client of our own, whose options
        // time every command out, no second timer either. Both would be scheduled for every command.
        Mono<T> sent = body.apply(open);
        return connections.ownsClient() ? sent : sent.timeout(commandTimeout, scheduler);
    }

    /** A failure of a command on the command connection, as {@link #command} reports it. */
    FencedLockException classify(Throwable error, String name, String operation) {
        return RedisErrors.classify(error, name, operation, commandTimeout);
    }

    /**
     * A command on the given connection: connect (within the connect timeout), refuse to queue while
     * disconnected, time out after {@code timeout}, and classify failures.
     */
    <T> Mono<T> run(String name, String operation, Mono<RedisClusterReactiveCommands<String, String>> connection,
            Function<RedisClusterReactiveCommands<String, String>, Mono<T>> body, Duration timeout) {
        return connected(connection, body, timeout).onErrorMap(e -> RedisErrors.classify(e, name, operation, timeout));
    }

    /**
     * A call that carries the commands of several locks: on the open connection, or once the connection is
     * opened as {@link #command} opens it (a burst of them may come before any connection is). Its failures are
     * left unclassified, for a caller that classifies them per lock ({@link #classify}).
     */
    <T> Mono<T> together(Function<RedisClusterReactiveCommands<String, String>, Mono<T>> body) {
        return Mono.defer(() -> {
            RedisClusterReactiveCommands<String, String> open = connections.openCommands();
            return open != null ? onOpen(open, body) : connected(connections.commands(), body, commandTimeout);
        });
    }

    /** Connects within the connect timeout, then runs the command within {@code timeout}; failures unclassified. */
    private <T> Mono<T> connected(Mono<RedisClusterReactiveCommands<String, String>> connection,
            Function<RedisClusterReactiveCommands<String, String>, Mono<T>> body, Duration timeout) {
        return connection
                .timeout(connectTimeout, scheduler)
                .onErrorMap(java.util.concurrent.TimeoutException.class,
                        e -> new RedisErrors.ConnectTimeoutException(connectTimeout))
                .flatMap(r -> body.apply(r).timeout(timeout, scheduler));
    }
}
