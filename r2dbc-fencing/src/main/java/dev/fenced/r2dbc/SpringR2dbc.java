package dev.fenced.r2dbc;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import java.util.function.Function;
import org.reactivestreams.Publisher;
import org.springframework.r2dbc.connection.ConnectionFactoryUtils;
import org.springframework.transaction.NoTransactionException;
import org.springframework.transaction.reactive.TransactionSynchronizationManager;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** Spring's transactions, reached only when {@code spring-r2dbc} is on the class path ({@link Connections#SPRING}). */
final class SpringR2dbc {

    private SpringR2dbc() {
    }

    /**
     * The transaction's connection on the factory, which the transaction closes (as {@code DatabaseClient} leaves it:
     * releasing it here would take it from the transaction before its commit), or a new one, closed afterwards.
     */
    static <T> Flux<T> with(ConnectionFactory connectionFactory, Function<Connection, ? extends Publisher<T>> work) {
        return inTransaction(connectionFactory).flatMapMany(joined -> joined
                ? ConnectionFactoryUtils.getConnection(connectionFactory).flatMapMany(work)
                : Flux.usingWhen(connectionFactory.create(), work, Connection::close));
    }

    /** Whether the subscriber runs in a Spring transaction that holds a connection of this factory. */
    static Mono<Boolean> inTransaction(ConnectionFactory connectionFactory) {
        return TransactionSynchronizationManager.forCurrentTransaction()
                .map(tx -> tx.isActualTransactionActive() && tx.hasResource(connectionFactory))
                .onErrorResume(NoTransactionException.class, e -> Mono.just(false));
    }
}
