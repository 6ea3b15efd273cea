package dev.fenced.lock.internal.postgres;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryMetadata;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * A connection factory over another that a test can close like a gate: while closed, every connection asked for
 * waits at the gate, and opening it hands them out. Counts the connections waiting at the gate, those handed out
 * and not yet closed, and the most handed out at once since {@link #resetPeak()}.
 *
 * <p>Tests of {@link StatementBatcher} through a store use it to make requests leave together: with the gate
 * closed, a lone request and then one statement a slot wait for their connections, so that the requests made next
 * queue up and leave in one statement once the gate opens.
 */
final class GatedConnections implements ConnectionFactory {

    private final ConnectionFactory delegate;
    private volatile Sinks.Empty<Void> gate = opened();
    private final AtomicInteger atGate = new AtomicInteger();
    private final AtomicInteger out = new AtomicInteger();
    private final AtomicInteger peak = new AtomicInteger();
    /** The requests of the last {@link #takeEverySlot} call. */
    private final List<CompletableFuture<?>> blockers = new CopyOnWriteArrayList<>();

    GatedConnections(ConnectionFactory delegate) {
        this.delegate = delegate;
    }

    private static Sinks.Empty<Void> opened() {
        Sinks.Empty<Void> open = Sinks.empty();
        open.tryEmitEmpty();
        return open;
    }

    /** Connections asked for from now on wait until {@link #open()}. */
    void close() {
        gate = Sinks.empty();
    }

    /** Hands out the connections waiting, and every later one at once. */
    void open() {
        gate.tryEmitEmpty();
    }

    /** How many connections wait at the gate. */
    int atGate() {
        return atGate.get();
    }

    /** The most connections handed out at once since the last reset. */
    int peak() {
        return peak.get();
    }

    /** Starts counting the peak again from the connections handed out now. */
    void resetPeak() {
        peak.set(out.get());
    }

    /**
     * Waits until {@code n} connections wait at the gate.
     *
     * @param n how many
     * @param timeout how long at most
     */
    void awaitAtGate(int n, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (atGate.get() < n) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError(atGate.get() + " connection(s) at the gate, not " + n);
            }
            Thread.sleep(5);
        }
    }

    /**
     * Closes the gate and takes every statement slot of a store whose connections come through it: sends
     * {@code blocked} (a request of the store, on a lock of its own) {@link StatementBatcher#MAX_IN_FLIGHT} + 1 times,
     * the first alone, outside the slots, then one a slot, and returns once all of them wait at the gate (having first
     * waited for the requests of the previous call, which may still hold slots). Requests of
     * that kind made next queue up in the store and leave together once the gate {@link #open() opens}; the caller
     * opens it, also when this fails.
     *
     * @param blocked a request of the store for a lock name
     * @param timeout how long at most to wait for the requests to reach the gate
     * @throws AssertionError when they do not, with the requests' failures attached
     */
    void takeEverySlot(Function<String, Mono<?>> blocked, Duration timeout) throws InterruptedException {
        // The blockers of an earlier call may still hold slots (their statements run once the gate opened): then
        // fewer of this call's would reach the gate.
        for (CompletableFuture<?> earlier : blockers) {
            try {
                earlier.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
            } catch (ExecutionException | TimeoutException e) {
                // counted below if this call's blockers cannot reach the gate
            }
        }
        blockers.clear();
        List<Throwable> failed = new CopyOnWriteArrayList<>();
        close();
        for (int i = 0; i <= StatementBatcher.MAX_IN_FLIGHT; i++) {
            blockers.add(blocked.apply("blocker-" + i + "-" + UUID.randomUUID()).doOnError(failed::add).toFuture());
        }
        try {
            awaitAtGate(StatementBatcher.MAX_IN_FLIGHT + 1, timeout);
        } catch (AssertionError e) {
            failed.forEach(e::addSuppressed);
            throw e;
        }
    }

    @Override
    public Publisher<? extends Connection> create() {
        return Mono.defer(() -> {
            atGate.incrementAndGet();
            return gate.asMono().doFinally(s -> atGate.decrementAndGet());
        }).then(Mono.from(delegate.create())).map(c -> {
            peak.accumulateAndGet(out.incrementAndGet(), Math::max);
            AtomicInteger closed = new AtomicInteger();
            return (Connection) Proxy.newProxyInstance(getClass().getClassLoader(), new Class<?>[] {Connection.class},
                    (proxy, method, args) -> {
                        if (method.getName().equals("close") && closed.getAndIncrement() == 0) {
                            out.decrementAndGet();
                        }
                        try {
                            return method.invoke(c, args);
                        } catch (InvocationTargetException e) {
                            throw e.getCause();
                        }
                    });
        });
    }

    @Override
    public ConnectionFactoryMetadata getMetadata() {
        return delegate.getMetadata();
    }
}
