package dev.fenced.lock.internal.redis;

import dev.fenced.lock.FencedLockException;
import dev.fenced.lock.internal.ClientSettings;
import io.lettuce.core.AbstractRedisReactiveCommands;
import io.lettuce.core.RedisNoScriptException;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.api.reactive.RedisClusterReactiveCommands;
import io.lettuce.core.output.CommandOutput;
import io.lettuce.core.output.NestedMultiOutput;
import io.lettuce.core.protocol.AsyncCommand;
import io.lettuce.core.protocol.Command;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.CommandType;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
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

    /**
     * {@code EVALSHA}, falling back to {@code EVAL} when the server lost its script cache. A script with a
     * {@code MULTI} reply on a connection to one server (standalone, Sentinel-managed, or one node of a cluster, as
     * acknowledged acquires use) that does not publish on a scheduler is written to the connection directly
     * ({@link #dispatched}), since Lettuce's reactive API allocates a 256-slot queue and a {@code Flux} for every
     * command (about 2 KB of issue 26's 11.5 KB a pair at 1 in flight); a cluster connection, which routes by key,
     * and a client that publishes on a scheduler take the reactive API. Cold either way: nothing is sent before the
     * Mono is subscribed to; the reply is emitted where the reactive API emits it.
     */
    static <T> Mono<T> eval(RedisClusterReactiveCommands<String, String> r, LuaScript script, ScriptOutputType type,
            String[] scriptKeys, String[] args) {
        StatefulRedisConnection<String, String> direct = type == ScriptOutputType.MULTI ? directOf(r) : null;
        if (direct != null) {
            return RedisCommands.<T>dispatched(direct, CommandType.EVALSHA, script.sha1(), scriptKeys, args)
                    .onErrorResume(RedisNoScriptException.class,
                            e -> dispatched(direct, CommandType.EVAL, script.source(), scriptKeys, args));
        }
        return r.<T>evalsha(script.sha1(), type, scriptKeys, args)
                .onErrorResume(RedisNoScriptException.class, e -> r.eval(script.source(), type, scriptKeys, args))
                .next();
    }

    /**
     * The connection of {@code r} when a script may be written to it directly: a connection to one server
     * (standalone, Sentinel-managed, or a cluster's node connection) whose client does not publish replies on a
     * scheduler ({@code ClientOptions.publishOnScheduler}, which only the reactive API honours); else null.
     */
    @SuppressWarnings("unchecked")
    private static @Nullable StatefulRedisConnection<String, String> directOf(RedisClusterReactiveCommands<String, String> r) {
        if (r instanceof AbstractRedisReactiveCommands<?, ?> commands
                && commands.getConnection() instanceof StatefulRedisConnection<?, ?> connection
                && !connection.getOptions().isPublishOnScheduler()) {
            return (StatefulRedisConnection<String, String>) connection;
        }
        return null;
    }

    /**
     * {@code EVALSHA digest} or {@code EVAL source} with a {@code MULTI} reply, written to the connection when
     * subscribed to. The completion callback is registered before the command is dispatched, so the reply is
     * emitted on the thread that decodes it (the connection's event loop), never on the subscriber's thread because
     * the reply came first (which {@code Mono.fromFuture} of an already sent command does). Only a command the
     * connection refuses at once (closed, or disconnected and rejecting commands) fails on the subscriber's thread.
     * Cancelling does not recall the command (nothing can): its reply is then dropped. A command that Lettuce
     * cancels itself fails with its {@code CancellationException}.
     */
    private static <T> Mono<T> dispatched(StatefulRedisConnection<String, String> connection, CommandType type,
            String script, String[] scriptKeys, String[] args) {
        return Mono.create(sink -> {
            CommandArgs<String, String> commandArgs = new CommandArgs<>(Utf8Codec.UTF8).add(script).add(scriptKeys.length)
                    .addKeys(scriptKeys).addValues(args);
            // A MULTI reply is a list; the caller names the type it reads it as (as the reactive API lets it).
            @SuppressWarnings("unchecked")
            CommandOutput<String, String, T> output =
                    (CommandOutput<String, String, T>) (CommandOutput<String, String, ?>) new NestedMultiOutput<>(Utf8Codec.UTF8);
            AsyncCommand<String, String, T> command = new AsyncCommand<>(new Command<>(type, output, commandArgs));
            // Set by this Mono's own cancellation, whose completion goes nowhere; a command Lettuce cancels itself
            // (a reset, a close with commands buffered, a failed reconnect) fails the Mono with its
            // CancellationException, as the reactive API's does.
            AtomicBoolean cancelledHere = new AtomicBoolean();
            command.whenComplete((value, error) -> {
                if (cancelledHere.get()) {
                    return;
                }
                if (error != null) {
                    sink.error(error);
                } else if (value == null) {
                    sink.success();
                } else {
                    sink.success(value);
                }
            });
            sink.onCancel(() -> {
                cancelledHere.set(true);
                command.cancel(false);
            });
            connection.dispatch(command);
        });
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
