package dev.fenced.lock.internal.postgres;

import dev.fenced.lock.internal.ClientSettings;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * Running one lease statement: the one path of every statement of a {@link PostgresLeaseStore}. Takes a
 * connection from the application's connection factory (a pool, normally) within the connect timeout, runs
 * the statement in auto-commit mode within the command timeout, gives the connection back, and classifies
 * failures in one place ({@link PostgresErrors}). Thread-safe.
 */
final class PostgresCommands {

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
        return Mono.defer(() -> closed.get()
                        ? Mono.error(new PostgresErrors.NotConnectedException("the lock client is closed", null))
                        : Mono.<Connection>from(connectionFactory.create()))
                .timeout(connectTimeout, scheduler)
                .onErrorMap(e -> !(e instanceof PostgresErrors.NotConnectedException), e -> new PostgresErrors.NotConnectedException(
                        e instanceof java.util.concurrent.TimeoutException
                                ? "no connection within " + connectTimeout.toMillis() + " ms" : String.valueOf(e.getMessage()), e));
    }

    /**
     * Runs {@code body} on a connection of its own, then closes (gives back) the connection.
     *
     * @param name the lock concerned, or the empty string
     * @param operation what is attempted, for errors
     * @param body the statement
     * @param <T> the reply type
     * @return the reply
     */
    <T> Mono<T> run(String name, String operation, Function<Connection, Mono<T>> body) {
        return Mono.usingWhen(connect(), c -> body.apply(c).timeout(commandTimeout, scheduler), Connection::close,
                        this::giveBackAfterError, Connection::close)
                .onErrorMap(e -> PostgresErrors.classify(e, name, operation, commandTimeout, table));
    }

    /**
     * A statement that timed out may still run in the database (waiting for a row lock, say) and take effect
     * later: an acquire that commits after its caller gave up would grant the lock to an owner nobody knows,
     * and the undo sent meanwhile would have found nothing to undo. So before the connection goes back to the
     * pool, the statement is cancelled in the database, and a trivial statement on the same connection waits
     * until the cancelled one has ended (on r2dbc-postgresql; another driver's connection is just given back).
     */
    private Mono<Void> giveBackAfterError(Connection connection, Throwable error) {
        if (!(error instanceof java.util.concurrent.TimeoutException) || !RunningStatements.CANCELLABLE) {
            return Mono.from(connection.close());
        }
        return RunningStatements.cancel(connection)
                .timeout(connectTimeout, scheduler)
                .onErrorResume(e -> Mono.empty())
                .then(Mono.from(connection.close()));
    }

    /** Refuses every later statement. */
    void close() {
        closed.set(true);
    }
}
