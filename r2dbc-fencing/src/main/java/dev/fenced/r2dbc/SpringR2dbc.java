package dev.fenced.r2dbc;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Wrapped;
import java.util.Optional;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import org.springframework.r2dbc.connection.ConnectionFactoryUtils;
import org.springframework.r2dbc.connection.ConnectionHolder;
import org.springframework.r2dbc.connection.DelegatingConnectionFactory;
import org.springframework.transaction.NoTransactionException;
import org.springframework.transaction.reactive.TransactionContextManager;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** Spring's transactions, reached only when {@code spring-r2dbc} is on the class path ({@link Connections#SPRING}). */
final class SpringR2dbc {

    /** How deep a chain of wrapping factories is followed; a chain that loops ends here. */
    private static final int MAX_WRAPPERS = 16;

    private SpringR2dbc() {
    }

    /**
     * The transaction's connection on the factory (or a factory it wraps), which the transaction closes (as
     * {@code DatabaseClient} leaves it: releasing it here would take it from the transaction before its commit), or
     * a new one, closed afterwards ({@link Connections#ownConnection}).
     */
    static <T> Flux<T> with(ConnectionFactory connectionFactory, Function<Connection, ? extends Publisher<T>> work) {
        return transactional(connectionFactory).flatMapMany(joined -> joined.isPresent()
                ? ConnectionFactoryUtils.getConnection(joined.get()).flatMapMany(work)
                : Connections.ownConnection(connectionFactory, work));
    }

    /** Whether the subscriber runs in a Spring transaction that holds a connection of this factory or one it wraps. */
    static Mono<Boolean> inTransaction(ConnectionFactory connectionFactory) {
        return transactional(connectionFactory).map(Optional::isPresent);
    }

    /**
     * The factory on which the subscriber's Spring transaction holds its connection: {@code connectionFactory}
     * itself, or the first factory down its chain of wrappers ({@code TransactionAwareConnectionFactoryProxy} and
     * other {@link DelegatingConnectionFactory}s, a pool's {@link Wrapped#unwrap()}) that the transaction knows, or
     * else a factory the transaction knows whose own chain of wrappers reaches {@code connectionFactory} (the
     * transaction manager built on a proxy or wrapper of the pool that the library is given). Spring looks the
     * resource up by the exact factory only, so in either direction it would find none. A bound connection in
     * auto-commit mode is not a transaction to join ({@link #joinable}).
     */
    private static Mono<Optional<ConnectionFactory>> transactional(ConnectionFactory connectionFactory) {
        // The context itself, not TransactionSynchronizationManager: the reactive one cannot list its resources.
        return TransactionContextManager.currentContext()
                .map(tx -> {
                    if (!tx.isActualTransactionActive()) {
                        return Optional.<ConnectionFactory>empty();
                    }
                    ConnectionFactory candidate = connectionFactory;
                    for (int depth = 0; candidate != null && depth < MAX_WRAPPERS; depth++) {
                        if (joinable(tx.getResources().get(candidate))) {
                            return Optional.of(candidate);
                        }
                        candidate = wrapped(candidate);
                    }
                    for (Object key : tx.getResources().keySet()) {
                        if (key instanceof ConnectionFactory bound && reaches(bound, connectionFactory)
                                && joinable(tx.getResources().get(key))) {
                            return Optional.of(bound);
                        }
                    }
                    return Optional.<ConnectionFactory>empty();
                })
                .onErrorResume(NoTransactionException.class, e -> Mono.just(Optional.empty()));
    }

    /**
     * Whether a resource bound to the transaction is a transaction to join. A {@code DatabaseClient} used on another
     * factory inside a transaction binds that factory's connection to the same transaction context, in auto-commit
     * mode: that is no transaction, so the library behaves there as outside a Spring transaction (its own transaction
     * for {@code inTransaction}). A resource that is not Spring's {@link ConnectionHolder} is joined as before.
     */
    private static boolean joinable(@Nullable Object resource) {
        if (resource == null) {
            return false;
        }
        if (!(resource instanceof ConnectionHolder holder)) {
            return true;
        }
        try {
            return !holder.getConnection().isAutoCommit();
        } catch (IllegalStateException released) {
            return false; // the holder's connection was released: nothing bound to join
        }
    }

    /** Whether {@code target} is on the chain of wrappers that starts at {@code factory}. */
    private static boolean reaches(ConnectionFactory factory, ConnectionFactory target) {
        ConnectionFactory candidate = factory;
        for (int depth = 0; candidate != null && depth < MAX_WRAPPERS; depth++) {
            if (candidate == target) {
                return true;
            }
            candidate = wrapped(candidate);
        }
        return false;
    }

    /** The factory that {@code factory} delegates to, or {@code null}. */
    private static @Nullable ConnectionFactory wrapped(ConnectionFactory factory) {
        if (factory instanceof DelegatingConnectionFactory delegating) {
            return delegating.getTargetConnectionFactory();
        }
        if (factory instanceof Wrapped<?> wrapper && wrapper.unwrap() instanceof ConnectionFactory inner && inner != factory) {
            return inner;
        }
        return null;
    }
}
