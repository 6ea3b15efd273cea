package dev.fenced.bench;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryMetadata;
import java.util.concurrent.atomic.AtomicLong;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;

/**
 * A connection factory that counts the connections taken from it. The PostgreSQL lease store takes one
 * connection per statement (and one for its {@code LISTEN}), so the count is the store's round trips: what
 * {@code INFO commandstats} gives for Redis.
 */
final class CountingConnections implements ConnectionFactory, ServerCounters {

    private final ConnectionFactory delegate;
    private final AtomicLong taken = new AtomicLong();

    CountingConnections(ConnectionFactory delegate) {
        this.delegate = delegate;
    }

    @Override
    public long requests() {
        return taken.get();
    }

    @Override
    public long commands() {
        return taken.get();
    }

    @Override
    public Publisher<? extends Connection> create() {
        return Mono.defer(() -> {
            taken.incrementAndGet();
            return Mono.from(delegate.create());
        });
    }

    @Override
    public ConnectionFactoryMetadata getMetadata() {
        return delegate.getMetadata();
    }
}
