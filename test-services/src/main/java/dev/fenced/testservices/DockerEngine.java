package dev.fenced.testservices;

import org.testcontainers.DockerClientFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Whether Testcontainers can reach a Docker engine, asked once per JVM. Thread-safe. */
final class DockerEngine {

    private static final Logger LOG = LoggerFactory.getLogger(DockerEngine.class);

    private DockerEngine() {
    }

    /** {@code true} if Testcontainers found a working Docker engine; the first call asks, later calls remember. */
    static boolean isAvailable() {
        return Answer.AVAILABLE;
    }

    // The holder idiom makes the (possibly slow) question lazy and asked once, without locks.
    private static final class Answer {
        static final boolean AVAILABLE = ask();

        private static boolean ask() {
            try {
                boolean available = DockerClientFactory.instance().isDockerAvailable();
                LOG.debug("Docker engine available to Testcontainers: {}", available);
                return available;
            } catch (RuntimeException | LinkageError e) {
                LOG.debug("Testcontainers could not look for a Docker engine", e);
                return false;
            }
        }
    }
}
