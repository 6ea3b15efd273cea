package dev.fenced.lock.internal.postgres;

import dev.fenced.lock.FencedLockException;
import dev.fenced.lock.internal.ClientSettings;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;
import reactor.util.retry.Retry;

/**
 * Running one lease statement: the one path of every statement of a {@link PostgresLeaseStore}. Takes a
 * connection from the application's connection factory (a pool, normally) within the connect timeout, runs
 * the statement in auto-commit mode within the command timeout, gives the connection back, and classifies
 * failures in one place ({@link PostgresErrors}). Thread-safe.
 */
final class PostgresCommands {

    private static final Logger log = Loggers.getLogger(PostgresCommands.class);

    /** How often a statement that failed to serialize is run again at once. */
    static final int SERIALIZATION_RETRIES = 3;
    /** The least time a statement is given once it has a connection. */
    private static final long MIN_STATEMENT_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

    private final ConnectionFactory connectionFactory;
    private final Duration commandTimeout;
    private final Duration connectTimeout;
    private final Scheduler scheduler;
    private final String table;
    private final AtomicBoolean closed = new AtomicBoolean();

    PostgresCommands(ConnectionFactory connectionFactory, Duration commandTimeout, Scheduler scheduler, String table) {
        this.connectionFactory = connectionFactory;
        this.commandTimeout = commandTimeout;
        this.connectTimeout = ClientSettings.connectTimeout(commandTimeout);
        this.scheduler = scheduler;
        this.table = table;
    }

    Duration commandTimeout() {
        return commandTimeout;
    }

    Duration connectTimeout() {
        return connectTimeout;
    }

    ConnectionFactory connectionFactory() {
        return connectionFactory;
    }

    /** A connection of the factory within the connect timeout; a failure to get one means nothing was sent. */
    Mono<Connection> connect() {
        return connect(connectTimeout);
    }

    private Mono<Connection> connect(Duration within) {
        return Mono.defer(() -> closed.get()
                        ? Mono.error(new PostgresErrors.NotConnectedException("the lock client is closed", null))
                        : Mono.<Connection>from(connectionFactory.create()))
                .timeout(within, scheduler)
                .onErrorMap(e -> !(e instanceof PostgresErrors.NotConnectedException), e -> new PostgresErrors.NotConnectedException(
                        e instanceof java.util.concurrent.TimeoutException
                                ? "no connection within " + within.toMillis() + " ms" : String.valueOf(e.getMessage()), e));
    }

    /**
     * Runs a renewal, a release or a ping on a connection of its own, then closes (gives back) the connection.
     * A failure is signalled at once: whatever cleaning up a failed statement needs (a cancel, a wait for it)
     * goes on in the background, so that a renewal that met a silent connection is retried on another one
     * before its lease runs out. Getting a connection and running the statement share one command timeout, so
     * that the timing check of {@code build()}, which counts the command timeout, counts all a renewal waits.
     *
     * @param name the lock concerned, or the empty string
     * @param operation what is attempted, for errors
     * @param body the statement
     * @param <T> the reply type
     * @return the reply
     */
    <T> Mono<T> run(String name, String operation, Function<Connection, Mono<T>> body) {
        return run(name, operation, false, body);
    }

    /**
     * Runs an acquire as {@link #run} does, except that a failure is signalled only once the statement was
     * asked to stop in the database (a cancel request on any failure after it was sent) and, where its own
     * connection still answers, once it has ended: the undo that follows then finds what the acquire took.
     *
     * @param name the lock concerned
     * @param body the statement
     * @param <T> the reply type
     * @return the reply
     */
    <T> Mono<T> runAcquire(String name, Function<Connection, Mono<T>> body) {
        return run(name, "acquire", true, body);
    }

    private <T> Mono<T> run(String name, String operation, boolean settle, Function<Connection, Mono<T>> body) {
        return runMany(settle, body).onErrorMap(e -> classify(e, name, operation));
    }

    /** A failure of a statement as the lock {@code name} reports it. */
    FencedLockException classify(Throwable error, String name, String operation) {
        return PostgresErrors.classify(error, name, operation, commandTimeout, table);
    }

    /**
     * Runs a statement of several locks as {@link #run} or (with {@code settle}) {@link #runAcquire} does, with its
     * failure left unclassified: each lock it carried classifies it for itself ({@link #classify}).
     *
     * @param settle whether it grants (an acquire): a failure is signalled once the statement has been stopped
     * @param body the statement
     * @param <T> the reply type
     * @return the reply
     */
    <T> Mono<T> runMany(boolean settle, Function<Connection, Mono<T>> body) {
        return Mono.defer(() -> {
            if (settle) {
                return Mono.usingWhen(connect(), c -> body.apply(c).timeout(commandTimeout, scheduler), PostgresCommands::giveBack,
                        this::afterFailure, PostgresCommands::giveBack);
            }
            // All that a renewal waits, a connection from the pool included, stays within one command timeout:
            // the only wait that build()'s timing check counts (ClientSettings.renewalProblem).
            long start = scheduler.now(TimeUnit.NANOSECONDS);
            return Mono.usingWhen(connect(commandTimeout),
                    c -> body.apply(c).timeout(Duration.ofNanos(Math.max(MIN_STATEMENT_NANOS,
                            commandTimeout.toNanos() - (scheduler.now(TimeUnit.NANOSECONDS) - start))), scheduler),
                    PostgresCommands::giveBack,
                    (c, error) -> Mono.fromRunnable(() -> afterFailure(c, error).subscribe()),
                    PostgresCommands::giveBack);
        })
                // A serialization failure (40001, at a pool default of REPEATABLE READ or SERIALIZABLE) undid the
                // whole one-statement transaction: running it again, with a new snapshot, is always safe.
                .retryWhen(Retry.max(SERIALIZATION_RETRIES).filter(PostgresErrors::serializationFailure)
                        .onRetryExhaustedThrow((spec, signal) -> signal.failure()));
    }

    /**
     * A statement that failed without an answer from the database (a timeout, a reset, an I/O error) may still
     * run there, waiting for a row lock, say: PostgreSQL notices a dead client only when it next writes to it.
     * An acquire that commits after its caller gave up would grant the lock to an owner nobody knows. So the
     * statement is cancelled in the database (a cancel request goes on a connection of its own, so a reset one
     * does not stop it) and, after a timeout, a trivial statement on the same connection waits until the
     * cancelled one has ended before the connection goes back to the pool: a cancel that arrived later would
     * hit the next statement of whoever has the connection then. A connection that does not answer that either,
     * or that failed under the statement, is closed rather than given back. Never fails: the statement's own
     * error is the one that counts.
     */
    private Mono<Void> afterFailure(Connection connection, Throwable error) {
        if (PostgresErrors.answered(error) || !RunningStatements.CANCELLABLE) {
            return giveBack(connection);
        }
        if (!(error instanceof java.util.concurrent.TimeoutException)) {
            // The connection failed under the statement (normally it is gone): nothing on it can show when the
            // cancel has landed, so it is never lent again, lest the cancel hit the next borrower's statement.
            return RunningStatements.cancelOnly(connection).timeout(connectTimeout, scheduler)
                    .onErrorResume(e -> {
                        log.debug("Could not cancel a failed lease statement ({}): {}", error.toString(), e.toString());
                        return Mono.empty();
                    })
                    .then(RunningStatements.closeUnderlying(connection))
                    .then(giveBack(connection));
        }
        return RunningStatements.cancelAndAwait(connection).timeout(connectTimeout, scheduler)
                .onErrorResume(e -> {
                    log.debug("Could not settle a lease statement that timed out: {}", e.toString());
                    return RunningStatements.closeUnderlying(connection);
                })
                .then(giveBack(connection));
    }

    /** Closes (gives back) a connection; a connection that fails to close is gone anyway. */
    private static Mono<Void> giveBack(Connection connection) {
        return Mono.defer(() -> Mono.from(connection.close())).onErrorResume(e -> Mono.empty());
    }

    /** Refuses every later statement. */
    void close() {
        closed.set(true);
    }
}
