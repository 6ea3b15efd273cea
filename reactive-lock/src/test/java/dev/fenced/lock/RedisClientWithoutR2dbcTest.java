package dev.fenced.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.File;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * R2DBC is an optional dependency: a Redis client is built and closed on a class path without it, so the
 * builder never loads an R2DBC type unless {@code postgres(...)} is called.
 */
class RedisClientWithoutR2dbcTest {

    @Test
    void aRedisClientNeedsNoR2dbcOnTheClassPath() throws Exception {
        String classPath = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        List<URL> urls = new ArrayList<>();
        for (String entry : classPath.split(File.pathSeparator)) {
            if (!entry.isEmpty() && !entry.contains("r2dbc")) {
                urls.add(Path.of(entry).toUri().toURL());
            }
        }
        try (URLClassLoader withoutR2dbc = new URLClassLoader(urls.toArray(URL[]::new), ClassLoader.getPlatformClassLoader())) {
            assertThatThrownBy(() -> Class.forName("io.r2dbc.spi.ConnectionFactory", false, withoutR2dbc))
                    .isInstanceOf(ClassNotFoundException.class);
            // Ordinary calls, as application code makes them (reflection over the builder's methods would resolve
            // the R2DBC type in the signature of postgres(...)).
            Runnable buildAndClose = (Runnable) Class.forName(BuildAndClose.class.getName(), true, withoutR2dbc)
                    .getDeclaredConstructor().newInstance();
            assertThat(buildAndClose.getClass().getClassLoader()).isSameAs(withoutR2dbc);
            buildAndClose.run();
        }
    }

    /** Builds a Redis client and closes it, loaded by the class loader without R2DBC. */
    public static final class BuildAndClose implements Runnable {

        @Override
        public void run() {
            FencedLockClient.builder().redisUri("redis://127.0.0.1:1").build().close();
        }
    }
}
