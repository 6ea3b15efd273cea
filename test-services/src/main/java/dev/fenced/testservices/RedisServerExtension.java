package dev.fenced.testservices;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.utility.DockerImageName;

/**
 * Injects a {@link RedisServer} into test constructors, test methods and lifecycle methods:
 * <pre>{@code
 * @ExtendWith(RedisServerExtension.class)
 * final class RedisLeaseStoreIT {
 *     @Test
 *     void acquires(RedisServer redis) { RedisClient.create(redis.uri()) ... }
 * }
 * }</pre>
 *
 * <p>The server is resolved on first use and then shared by every test class in the JVM, in this order:
 * the address in the environment variable {@value #ENVIRONMENT_VARIABLE} ({@code redis://host[:port]});
 * else a Testcontainers container of {@value #IMAGE} when a Docker engine is available; else an
 * {@link EmbeddedRedis}. The source and address are logged at INFO. A server this extension started is
 * stopped when the JUnit engine finishes, or at JVM exit if it was only reached through {@link #server()}.
 * Tests share the server, so they should use their own keys rather than flush it; a test that needs a
 * server of its own uses {@link EmbeddedRedis}.
 *
 * <p>Thread-safe: concurrent tests resolve the same server, started once.
 */
public final class RedisServerExtension extends SharedServiceExtension<RedisServer> {

    /** The environment variable that names an existing Redis server: {@code redis://host[:port]}. */
    public static final String ENVIRONMENT_VARIABLE = "FENCED_REDIS_URI";

    /** The image Testcontainers runs when no server is named in the environment. */
    public static final String IMAGE = "redis:7-alpine";

    private static final Logger LOG = LoggerFactory.getLogger(RedisServerExtension.class);
    private static final int CONTAINER_PORT = 6379;
    private static final SharedService<RedisServer> SHARED =
            new SharedService<>("Redis server", RedisServerExtension::startServer);

    /** Creates the extension; JUnit calls this for {@code @ExtendWith}. Holds no state of its own. */
    public RedisServerExtension() {
        super(RedisServer.class, SHARED);
    }

    /**
     * The shared server, resolved and started by the first call in the JVM; for code that cannot take a
     * parameter, such as a static initializer or a Spring {@code @DynamicPropertySource}. Blocks while
     * another thread starts it.
     *
     * @throws IllegalArgumentException if {@value #ENVIRONMENT_VARIABLE} is set but malformed
     * @throws IllegalStateException if no source could provide a server; the message says why
     */
    public static RedisServer server() {
        return SHARED.get();
    }

    private static SharedService.Running<RedisServer> startServer() {
        String configured = System.getenv(ENVIRONMENT_VARIABLE);
        if (configured != null && !configured.isBlank()) {
            RedisServer server = RedisServer.fromEnvironment(ENVIRONMENT_VARIABLE, configured);
            LOG.info("Redis for tests: {} from {} ({})", server.uri(), ENVIRONMENT_VARIABLE, server.source());
            return SharedService.Running.existing(server);
        }
        GenericContainer<?> container = Containers.tryStart("Redis",
                () -> new GenericContainer<>(DockerImageName.parse(IMAGE)).withExposedPorts(CONTAINER_PORT));
        if (container != null) {
            RedisServer server = new RedisServer(
                    container.getHost(), container.getMappedPort(CONTAINER_PORT), ServiceSource.TESTCONTAINERS);
            LOG.info("Redis for tests: {} in a container of {} ({})", server.uri(), IMAGE, server.source());
            return SharedService.Running.started(server, container::stop);
        }
        EmbeddedRedis embedded = EmbeddedRedis.start();
        RedisServer server = new RedisServer(embedded.host(), embedded.port(), ServiceSource.EMBEDDED);
        LOG.info("Redis for tests: {} in an embedded process ({})", server.uri(), server.source());
        return SharedService.Running.started(server, embedded::close);
    }
}
