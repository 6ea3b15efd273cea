package dev.fenced.r2dbc;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import java.util.Objects;
import java.util.function.Function;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Where the fenced statements of a {@code ConnectionFactory} run: in the subscriber's Spring transaction on that
 * factory (or one it wraps) when there is one (Spring's {@code spring-r2dbc} on the class path, a {@code TransactionalOperator} or
 * {@code @Transactional} upstream), else on a connection of their own.
 */
final class Connections {

    /** Whether Spring's R2DBC support is on the class path; without it, no transaction can be joined. */
    static final boolean SPRING = present("org.springframework.r2dbc.connection.ConnectionFactoryUtils");

    private Connections() {
    }

    private static boolean present(String className) {
        try {
            Class.forName(className, false, Connections.class.getClassLoader());
            return true;
        } catch (ClassNotFoundException | LinkageError e) {
            return false;
        }
    }

    /**
     * Runs {@code work} on the connection of the current transaction on {@code connectionFactory} or on a factory it
     * wraps, or on a new connection closed afterwards (in auto-commit mode each statement commits on its own; a
     * connection the factory hands out in a transaction stays in it). Begins and commits nothing.
     */
    static <T> Flux<T> with(ConnectionFactory connectionFactory, Function<Connection, ? extends Publisher<T>> work) {
        Objects.requireNonNull(connectionFactory, "connectionFactory must not be null");
        return SPRING ? SpringR2dbc.with(connectionFactory, work)
                : Flux.usingWhen(connectionFactory.create(), work, Connection::close);
    }

    /** As {@link #with(ConnectionFactory, Function)}, for one value. */
    static <T> Mono<T> withOne(ConnectionFactory connectionFactory, Function<Connection, Mono<T>> work) {
        return with(connectionFactory, work).singleOrEmpty();
    }

    /**
     * Runs {@code work} in a transaction: the current one on {@code connectionFactory} (or a factory it wraps), which
     * its owner commits or rolls back (an error of the work reaches the owner, which rolls back); else, when the
     * connection the factory hands out is already in a transaction (not in auto-commit mode: a factory that hands
     * out the caller's connection), that one, neither begun nor committed here; else one of its own, begun on the new
     * connection, committed when the work completes and rolled back on error or cancellation. Never begins or
     * commits a transaction that it did not begin: the drivers skip {@code BEGIN} inside an open transaction, but
     * send a real {@code COMMIT}, which would commit the caller's transaction half-way.
     */
    static <T> Flux<T> inTransaction(ConnectionFactory connectionFactory, Function<Connection, ? extends Publisher<T>> work) {
        Objects.requireNonNull(connectionFactory, "connectionFactory must not be null");
        Mono<Boolean> joined = SPRING ? SpringR2dbc.inTransaction(connectionFactory) : Mono.just(false);
        return joined.flatMapMany(join -> join ? with(connectionFactory, work)
                : Flux.usingWhen(connectionFactory.create(),
                        connection -> connection.isAutoCommit() ? ownTransaction(connection, work) : work.apply(connection),
                        Connection::close));
    }

    private static <T> Flux<T> ownTransaction(Connection connection, Function<Connection, ? extends Publisher<T>> work) {
        return Flux.usingWhen(Mono.from(connection.beginTransaction()).thenReturn(connection),
                work,
                Connection::commitTransaction,
                (c, error) -> c.rollbackTransaction(),
                Connection::rollbackTransaction);
    }
}
