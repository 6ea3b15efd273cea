package dev.fenced.lock.internal.postgres;

import io.r2dbc.postgresql.api.PostgresqlConnection;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Wrapped;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Cancels the statement running on a connection of r2dbc-postgresql, through the connection of a pool too.
 * Only touched once {@link #CANCELLABLE} says the driver is there: it is an optional dependency.
 */
final class RunningStatements {

    /** Whether r2dbc-postgresql is on the class path. */
    static final boolean CANCELLABLE = present("io.r2dbc.postgresql.api.PostgresqlConnection");

    private RunningStatements() {
    }

    /**
     * Asks the database to cancel what runs on {@code connection}, then runs {@code SELECT 1} on it, whose reply
     * comes once the cancelled statement has ended (its error is ignored; a statement that finished first is not
     * undone). Does nothing on a connection that is not r2dbc-postgresql's.
     *
     * @param connection the connection, possibly a pool's wrapper
     * @return completion once the connection is free again
     */
    static Mono<Void> cancelAndAwait(Connection connection) {
        PostgresqlConnection postgres = unwrap(connection);
        if (postgres == null) {
            return Mono.empty();
        }
        return postgres.cancelRequest()
                .then(Flux.from(connection.createStatement("SELECT 1").execute())
                        .flatMap(result -> result.map((row, meta) -> 1))
                        .then());
    }

    /**
     * Asks the database to cancel what runs on {@code connection}, whose own channel may be gone (a reset): the
     * request goes on a connection of its own, with the backend's key from the handshake. Does nothing on a
     * connection that is not r2dbc-postgresql's.
     *
     * @param connection the connection, possibly a pool's wrapper
     * @return completion once the request was delivered
     */
    static Mono<Void> cancelOnly(Connection connection) {
        PostgresqlConnection postgres = unwrap(connection);
        return postgres == null ? Mono.empty() : postgres.cancelRequest();
    }

    /**
     * Closes the driver's connection under a pool's wrapper, so that the pool drops it instead of lending it
     * again (a connection that did not answer may answer the next borrower with the old statement's reply).
     *
     * @param connection the connection, possibly a pool's wrapper
     * @return completion, never an error
     */
    static Mono<Void> closeUnderlying(Connection connection) {
        PostgresqlConnection postgres = unwrap(connection);
        return postgres == null || postgres == connection ? Mono.empty()
                : Mono.from(postgres.close()).onErrorResume(e -> Mono.empty());
    }

    private static @Nullable PostgresqlConnection unwrap(Object connection) {
        Object current = connection;
        for (int depth = 0; depth < 8 && current != null; depth++) {
            if (current instanceof PostgresqlConnection postgres) {
                return postgres;
            }
            current = current instanceof Wrapped<?> wrapped ? wrapped.unwrap() : null;
        }
        return null;
    }

    private static boolean present(String className) {
        try {
            Class.forName(className, false, RunningStatements.class.getClassLoader());
            return true;
        } catch (ClassNotFoundException | LinkageError e) {
            return false;
        }
    }
}
