package dev.fenced.lock.internal.redis;

import io.lettuce.core.api.StatefulConnection;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * A connection opened on first use and shared afterwards. A failed attempt is not remembered: the next
 * use tries again; so is a connection that closed on a client without auto-reconnect. Cancelling a subscriber does not cancel the shared attempt. Thread-safe.
 *
 * @param <C> the connection type
 */
final class LazyConnection<C extends StatefulConnection<?, ?>> {

    private final Supplier<CompletableFuture<C>> connector;
    private final AtomicReference<CompletableFuture<C>> current = new AtomicReference<>();
    private volatile boolean closed;

    LazyConnection(Supplier<CompletableFuture<C>> connector) {
        this.connector = connector;
    }

    Mono<C> get() {
        return Mono.defer(() -> {
            if (closed) {
                return Mono.error(new ClosedException());
            }
            CompletableFuture<C> existing = current.get();
            if (existing == null || existing.isCompletedExceptionally() || isClosedForGood(existing)) {
                CompletableFuture<C> fresh = new CompletableFuture<>();
                if (current.compareAndSet(existing, fresh)) {
                    connect(fresh);
                }
                existing = current.get();
            }
            return Mono.fromFuture(existing, true);
        });
    }

    /**
     * Whether a connection is closed and its client will not reconnect it (a shared client configured
     * without auto-reconnect): then it is replaced on the next use, and the old one closed.
     */
    private static boolean isClosedForGood(CompletableFuture<? extends StatefulConnection<?, ?>> f) {
        if (!f.isDone() || f.isCompletedExceptionally()) {
            return false;
        }
        StatefulConnection<?, ?> c = f.getNow(null);
        if (c == null || c.isOpen() || c.getOptions().isAutoReconnect()) {
            return false;
        }
        c.closeAsync();
        return true;
    }

    /** The connection if it is open already, else {@code null}; never connects. */
    @Nullable C current() {
        CompletableFuture<C> f = current.get();
        return f != null && f.isDone() && !f.isCompletedExceptionally() ? f.getNow(null) : null;
    }

    /**
     * Drops {@code connection} if it is the current one, and closes it: the next use opens another (a connection
     * still attached to a server that is no longer the one its address leads to).
     */
    void discard(C connection) {
        CompletableFuture<C> f = current.get();
        if (f != null && f.isDone() && !f.isCompletedExceptionally() && f.getNow(null) == connection
                && current.compareAndSet(f, null)) {
            connection.closeAsync();
        }
    }

    private void connect(CompletableFuture<C> target) {
        CompletableFuture<C> attempt;
        try {
            attempt = connector.get();
        } catch (RuntimeException e) {
            target.completeExceptionally(e);
            return;
        }
        attempt.whenComplete((connection, error) -> {
            if (error != null) {
                target.completeExceptionally(error);
            } else if (closed) {
                connection.closeAsync();
                target.completeExceptionally(new ClosedException());
            } else {
                target.complete(connection);
            }
        });
    }

    /**
     * Closes the connection. A connect still in progress is not waited for: it is closed as soon as it
     * completes, so closing never waits for a server that does not answer.
     */
    Mono<Void> close() {
        return Mono.defer(() -> {
            closed = true;
            CompletableFuture<C> f = current.getAndSet(null);
            if (f == null) {
                return Mono.empty();
            }
            if (!f.isDone()) {
                return Mono.empty(); // connect() closes it when it completes, seeing closed
            }
            C c = f.isCompletedExceptionally() ? null : f.getNow(null);
            return c == null ? Mono.empty() : Mono.fromFuture(c.closeAsync(), true).onErrorResume(e -> Mono.empty()).then();
        });
    }

    /** A command on a connection that was closed with the client: it never left. */
    static final class ClosedException extends IllegalStateException {

        private static final long serialVersionUID = 1L;

        ClosedException() {
            super("connection closed");
        }
    }
}
