package dev.fenced.r2dbc;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Wrapped;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.Objects;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Where the fenced statements of a {@code ConnectionFactory} run: in the subscriber's Spring transaction on that
 * factory (or one it wraps, or one that wraps it) when there is one (Spring's {@code spring-r2dbc} on the class path, a {@code TransactionalOperator} or
 * {@code @Transactional} upstream), else on a connection of their own.
 */
final class Connections {

    /** Whether Spring's R2DBC support is on the class path; without it, no transaction can be joined. */
    static final boolean SPRING = present("org.springframework.r2dbc.connection.ConnectionFactoryUtils");

    /** How deep a chain of wrapping connections (a pool's, Spring's proxies) is followed to reach the driver's. */
    private static final int MAX_WRAPPERS = 16;

    /**
     * r2dbc-mariadb's {@code MariadbConnection.isInTransaction()} (the server's in-transaction status flag), or
     * {@code null} when that driver is not on the class path.
     */
    private static final @Nullable Method MARIADB_IN_TRANSACTION = method("org.mariadb.r2dbc.api.MariadbConnection",
            "isInTransaction");

    private Connections() {
    }

    private static @Nullable Method method(String className, String name) {
        try {
            return Class.forName(className, false, Connections.class.getClassLoader()).getMethod(name);
        } catch (ReflectiveOperationException | LinkageError e) {
            return null;
        }
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
     * wraps, or on a new connection closed afterwards ({@link #ownConnection}: in auto-commit mode each statement
     * commits on its own; a connection the factory hands out in a transaction stays in it; one with auto-commit off
     * and no transaction open gets a transaction of its own, so that the work commits).
     */
    static <T> Flux<T> with(ConnectionFactory connectionFactory, Function<Connection, ? extends Publisher<T>> work) {
        Objects.requireNonNull(connectionFactory, "connectionFactory must not be null");
        return SPRING ? SpringR2dbc.with(connectionFactory, work) : ownConnection(connectionFactory, work);
    }

    /**
     * Runs {@code work} on a new connection of {@code connectionFactory}, closed afterwards: as it is when it is in
     * auto-commit mode or already in a transaction (which its owner ends), else (auto-commit off and no transaction
     * open, where the statements would open one that nobody commits) in a transaction of its own.
     */
    static <T> Flux<T> ownConnection(ConnectionFactory connectionFactory, Function<Connection, ? extends Publisher<T>> work) {
        return Flux.usingWhen(connectionFactory.create(),
                connection -> connection.isAutoCommit() || inOpenTransaction(connection)
                        ? Flux.from(work.apply(connection)) : ownTransaction(connection, work),
                Connection::close);
    }

    /** As {@link #with(ConnectionFactory, Function)}, for one value. */
    static <T> Mono<T> withOne(ConnectionFactory connectionFactory, Function<Connection, Mono<T>> work) {
        return with(connectionFactory, work).singleOrEmpty();
    }

    /**
     * Runs {@code work} in a transaction: the current one on {@code connectionFactory} (or a factory it wraps), which
     * its owner commits or rolls back (an error of the work reaches the owner, which rolls back; a connection the
     * Spring transaction context holds in auto-commit mode, as a {@code DatabaseClient} on a second factory inside a
     * transaction on the first binds it, is no transaction: {@link SpringR2dbc}); else, when a
     * transaction is open on the connection the factory hands out ({@link #inOpenTransaction}: a factory that hands
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
                        connection -> inOpenTransaction(connection) ? work.apply(connection) : ownTransaction(connection, work),
                        Connection::close));
    }

    /**
     * Whether a transaction is open on the connection, which its owner ends. Auto-commit off is not enough: with
     * r2dbc-mariadb (a factory whose connections call {@code setAutoCommit(false)}, or {@code ?autocommit=false} in
     * the URL) no transaction is open until a statement runs, and a transaction begun here must then be committed
     * here. r2dbc-mariadb says so with {@code isInTransaction()}, the server's status flag, reached through the
     * wrappers that implement {@link Wrapped} (a pool's, Spring's). r2dbc-postgresql reports auto-commit off exactly
     * when its client's transaction status is not idle ({@code setAutoCommit(false)} sends {@code BEGIN} at once),
     * so there {@code !isAutoCommit()} is the answer. For any other driver, and a wrapper that hides the driver's
     * connection, auto-commit off counts as a transaction open: work left uncommitted is the side that never
     * commits another's transaction half-way.
     */
    static boolean inOpenTransaction(Connection connection) {
        if (connection.isAutoCommit()) {
            return false;
        }
        Method inTransaction = MARIADB_IN_TRANSACTION;
        Object candidate = connection;
        for (int depth = 0; inTransaction != null && candidate instanceof Connection && depth < MAX_WRAPPERS; depth++) {
            if (inTransaction.getDeclaringClass().isInstance(candidate)) {
                try {
                    return Boolean.TRUE.equals(inTransaction.invoke(candidate));
                } catch (IllegalAccessException | InvocationTargetException e) {
                    return true;
                }
            }
            Object inner = candidate instanceof Wrapped<?> wrapped ? wrapped.unwrap() : null;
            candidate = inner == candidate ? null : inner;
        }
        return true;
    }

    private static <T> Flux<T> ownTransaction(Connection connection, Function<Connection, ? extends Publisher<T>> work) {
        return Flux.usingWhen(Mono.from(connection.beginTransaction()).thenReturn(connection),
                work,
                Connection::commitTransaction,
                (c, error) -> c.rollbackTransaction(),
                Connection::rollbackTransaction);
    }
}
