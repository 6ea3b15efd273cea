package dev.fenced.testservices;

import java.util.function.Supplier;

import org.junit.jupiter.api.extension.ExtensionContext;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One server per JVM: started on first {@link #get()}, stopped by {@link #stop()}, by the JUnit root store
 * when the engine finishes, or by a shutdown hook at JVM exit, whichever comes first. After a stop the
 * next {@code get()} starts a new server. Thread-safe: all state is guarded by this object's monitor, so
 * concurrent first calls start one server.
 */
final class SharedService<S> {

    private static final Logger LOG = LoggerFactory.getLogger(SharedService.class);
    private static final ExtensionContext.Namespace NAMESPACE = ExtensionContext.Namespace.create(SharedService.class);

    /** A server and, if it was started for the tests, how to stop it. */
    record Running<S>(S server, @Nullable AutoCloseable stopper) {

        /** A server that runs anyway, such as one named in the environment: stopping it is not ours to do. */
        static <S> Running<S> existing(S server) {
            return new Running<>(server, null);
        }

        /** A server started for the tests, which {@code stopper} stops. */
        static <S> Running<S> started(S server, AutoCloseable stopper) {
            return new Running<>(server, stopper);
        }
    }

    private final String name;
    private final Supplier<Running<S>> starter;
    private @Nullable Running<S> running;
    private boolean shutdownHookAdded;

    SharedService(String name, Supplier<Running<S>> starter) {
        this.name = name;
        this.starter = starter;
    }

    /** The server, started by this call if none is running. Blocks while another thread starts it. */
    synchronized S get() {
        Running<S> current = running;
        if (current == null) {
            current = starter.get();
            running = current;
            if (!shutdownHookAdded) {
                Runtime.getRuntime().addShutdownHook(new Thread(this::stop, name + "-stopper"));
                shutdownHookAdded = true;
            }
        }
        return current.server();
    }

    /** Stops the server if this JVM started one and it runs; a failure to stop is logged, not thrown. Idempotent. */
    synchronized void stop() {
        Running<S> current = running;
        running = null;
        AutoCloseable stopper = current == null ? null : current.stopper();
        if (stopper != null) {
            try {
                stopper.close();
                LOG.info("Stopped the shared {}", name);
            } catch (Exception e) {
                LOG.warn("Could not stop the shared {}", name, e);
            }
        }
    }

    /**
     * Makes the root context of {@code context} stop this service when the JUnit engine finishes; calling it
     * again in the same engine run does nothing. Starts nothing.
     */
    void stopWhenEngineFinishes(ExtensionContext context) {
        context.getRoot().getStore(NAMESPACE)
                .computeIfAbsent(this, key -> (AutoCloseable) this::stop, AutoCloseable.class);
    }
}
