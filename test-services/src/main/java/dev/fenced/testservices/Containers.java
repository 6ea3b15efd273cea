package dev.fenced.testservices;

import java.util.function.Supplier;

import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.testcontainers.containers.GenericContainer;

/** Starts Testcontainers containers for the shared servers, if Docker allows. Stateless, so thread-safe. */
final class Containers {

    private static final Logger LOG = LoggerFactory.getLogger(Containers.class);

    private Containers() {
    }

    /**
     * Starts the container that {@code definition} describes, or returns {@code null} without creating it
     * when there is no Docker engine, or after logging a warning when it does not start (an image that
     * cannot be pulled, say), so that the caller moves on to the next source.
     */
    static @Nullable GenericContainer<?> tryStart(String service, Supplier<GenericContainer<?>> definition) {
        if (!DockerEngine.isAvailable()) {
            return null;
        }
        GenericContainer<?> container = definition.get();
        try {
            container.start();
            return container;
        } catch (RuntimeException e) {
            LOG.warn("Testcontainers could not start {} from {}; trying an embedded server instead",
                    service, container.getDockerImageName(), e);
            try {
                container.stop();
            } catch (RuntimeException stopFailure) {
                e.addSuppressed(stopFailure);
            }
            return null;
        }
    }
}
