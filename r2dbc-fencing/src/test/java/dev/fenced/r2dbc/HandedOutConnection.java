package dev.fenced.r2dbc;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryMetadata;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;

/**
 * A plain factory (neither Spring's nor a pool) that hands out one connection, which is in the caller's own
 * transaction, and leaves closing it to the caller: what a factory over a request's own connection does. Shared with
 * the tests of {@code r2dbc-fencing-spring} through this module's test jar.
 */
public final class HandedOutConnection {

    private HandedOutConnection() {
    }

    /**
     * The factory.
     *
     * @param connection the connection it hands out, whose {@code close()} it makes a no-op
     * @param of the factory whose metadata it reports
     * @return the factory
     */
    public static ConnectionFactory factory(Connection connection, ConnectionFactory of) {
        Connection unclosable = (Connection) Proxy.newProxyInstance(Connection.class.getClassLoader(),
                new Class<?>[] {Connection.class}, (proxy, method, args) -> {
                    if (method.getName().equals("close") && method.getParameterCount() == 0) {
                        return Mono.empty();
                    }
                    try {
                        return method.invoke(connection, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        return new ConnectionFactory() {
            @Override
            public Publisher<? extends Connection> create() {
                return Mono.just(unclosable);
            }

            @Override
            public ConnectionFactoryMetadata getMetadata() {
                return of.getMetadata();
            }
        };
    }
}
