package dev.fenced.testservices;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import redis.embedded.RedisServer;
import redis.embedded.core.ExecutableProvider;

/**
 * A Redis process owned by one test, for tests that stop, restart or otherwise abuse their server. It
 * listens on {@code 127.0.0.1} only, on a free port chosen at {@link #start()} and kept across restarts,
 * and never persists data: it runs with {@code --save "" --appendonly no} in a private working directory
 * that is emptied whenever the process stops, so every (re)start begins with an empty data set. A replica of it
 * is synced at once ({@code --repl-diskless-sync-delay 0}).
 *
 * <p>The binary is the Redis 7 bundled in this module (the static builds for Linux and macOS, x86-64 and arm64,
 * of {@code com.github.lansheng228:embedded-redis}); where none is bundled or it does not start, {@code redis-server}
 * from the {@code PATH}; then the Redis 6.2 of {@code com.github.codemonstur:embedded-redis}. So a machine with only
 * a JDK runs the same Redis 7 as CI. Use it with try-with-resources or close it in an
 * {@code @AfterEach}/{@code @AfterAll} method.
 *
 * <p>Thread-safe: {@link #stop()}, {@link #restart()} and {@link #close()} are serialized on this object;
 * the address methods never change.
 */
public final class EmbeddedRedis implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(EmbeddedRedis.class);
    private static final int PORT_ATTEMPTS = 3;

    /** The {@code redis-server} binaries this package can run; {@link #PREFERRED} says in which order. */
    enum Binary {
        REDIS_7("the Redis 7 redis-server bundled in test-services") {
            @Override
            File locate() throws IOException {
                return BundledRedis.extract();
            }
        },
        PATH("redis-server on the PATH") {
            @Override
            File locate() throws IOException {
                return onPath(System.getenv().getOrDefault("PATH", ""));
            }
        },
        REDIS_6("the Redis 6.2 redis-server shipped in embedded-redis") {
            @Override
            File locate() throws IOException {
                return ExecutableProvider.newJarResourceProvider().get();
            }
        };

        /**
         * The order every server of this package tries: the bundled Redis 7 first, so that a laptop with only a JDK
         * runs what CI runs; the PATH where no binary is bundled for this platform; Redis 6.2 last.
         */
        static final List<Binary> PREFERRED = List.of(REDIS_7, PATH, REDIS_6);

        private final String description;
        // An artifact's binary is copied to a new temporary file by every locate(): do it once.
        private @Nullable File located;

        Binary(String description) {
            this.description = description;
        }

        abstract File locate() throws IOException;

        synchronized File executable() throws IOException {
            File file = located;
            if (file == null || !file.canExecute()) {
                file = locate();
                located = file;
            }
            return file;
        }

        /** The first executable {@code redis-server} in the directories of {@code path} (a {@code PATH} value). */
        static File onPath(String path) throws IOException {
            for (String directory : path.split(File.pathSeparator)) {
                if (!directory.isEmpty()) {
                    File candidate = new File(directory, "redis-server");
                    if (candidate.isFile() && candidate.canExecute()) {
                        return candidate;
                    }
                }
            }
            throw new IOException("no executable redis-server in any directory of the PATH '" + path + "'");
        }

        /** The first of {@link #PREFERRED} that is found on this machine. */
        static File firstAvailable() {
            IllegalStateException failure = new IllegalStateException("No redis-server: none of "
                    + PREFERRED.stream().map(b -> b.description).toList() + " is available here");
            for (Binary binary : PREFERRED) {
                try {
                    return binary.executable();
                } catch (IOException | RuntimeException e) {
                    failure.addSuppressed(e);
                }
            }
            throw failure;
        }
    }

    private final int port;
    private final File executable;
    private final String description;
    private final Path directory;
    private @Nullable RedisServer process;
    private boolean closed;

    private EmbeddedRedis(int port, File executable, String description, Path directory, RedisServer process) {
        this.port = port;
        this.executable = executable;
        this.description = description;
        this.directory = directory;
        this.process = process;
    }

    /**
     * Starts a new Redis on a free port of {@code 127.0.0.1} and returns once it accepts connections.
     *
     * @throws IllegalStateException if neither binary could be started; the message says why for each
     */
    public static EmbeddedRedis start() {
        return start(Binary.PREFERRED.toArray(Binary[]::new));
    }

    /** Starts Redis from the first of {@code binaries} that works; tests use it to try each binary alone. */
    static EmbeddedRedis start(Binary... binaries) {
        Path directory = createDirectory();
        List<String> failures = new ArrayList<>();
        List<Exception> causes = new ArrayList<>();
        for (Binary binary : binaries) {
            File executable;
            try {
                executable = binary.executable();
            } catch (IOException | RuntimeException e) {
                failures.add(binary.description + " was not found (" + e.getMessage() + ")");
                causes.add(e);
                continue;
            }
            for (int attempt = 1; attempt <= PORT_ATTEMPTS; attempt++) {
                int port = Loopback.freePort();
                try {
                    RedisServer process = launch(executable, port, directory);
                    EmbeddedRedis redis = new EmbeddedRedis(port, executable, binary.description, directory, process);
                    LOG.info("Started an embedded Redis ({}) at {}", binary.description, redis.uri());
                    return redis;
                } catch (IOException | RuntimeException e) {
                    causes.add(e);
                    if (attempt == PORT_ATTEMPTS) {
                        failures.add(binary.description + " did not start on " + PORT_ATTEMPTS
                                + " free ports (last: " + e.getMessage() + ")");
                    }
                }
            }
        }
        deleteQuietly(directory);
        IllegalStateException failure = new IllegalStateException(
                "Could not start an embedded Redis on " + Loopback.HOST + ": " + String.join("; ", failures));
        causes.forEach(failure::addSuppressed);
        throw failure;
    }

    /** Always {@code 127.0.0.1}. */
    public String host() {
        return Loopback.HOST;
    }

    /** The port, never 6379 unless the operating system happened to pick it; the same after a restart. */
    public int port() {
        return port;
    }

    /** {@code redis://127.0.0.1:port}. */
    public String uri() {
        return "redis://" + Urls.authority(Loopback.HOST, port);
    }

    /** Whether the process is running: {@code true} after start and restart, {@code false} after stop and close. */
    public synchronized boolean isRunning() {
        return process != null;
    }

    /**
     * Stops the process (SIGTERM, then waits for it to exit) and discards its data; clients see their
     * connections closed and new connections refused. Does nothing if already stopped.
     *
     * @throws IllegalStateException if the process could not be stopped
     */
    public synchronized void stop() {
        RedisServer current = process;
        process = null;
        if (current != null) {
            try {
                current.stop();
            } catch (IOException e) {
                throw new IllegalStateException("Could not stop the embedded Redis at " + uri(), e);
            } finally {
                emptyDirectory();
            }
            LOG.info("Stopped the embedded Redis at {}", uri());
        }
    }

    /**
     * Stops the process if it runs, then starts a new one on the same port with an empty data set, and
     * returns once it accepts connections.
     *
     * @throws IllegalStateException if this was closed, or the new process did not start (for example
     *     because another process took the port meanwhile)
     */
    public synchronized void restart() {
        if (closed) {
            throw new IllegalStateException("The embedded Redis at " + uri() + " is closed and cannot restart");
        }
        stop();
        try {
            process = launch(executable, port, directory);
        } catch (IOException | RuntimeException e) {
            throw new IllegalStateException("Could not restart the embedded Redis at " + uri()
                    + " with " + description + ": " + e.getMessage(), e);
        }
        LOG.info("Restarted the embedded Redis at {}", uri());
    }

    /** Stops the process and deletes its working directory. Idempotent. */
    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            try {
                stop();
            } finally {
                deleteQuietly(directory);
            }
        }
    }

    @Override
    public String toString() {
        return "EmbeddedRedis[" + uri() + "]";
    }

    private static RedisServer launch(File executable, int port, Path directory) throws IOException {
        List<String> command = List.of(executable.getAbsolutePath(),
                "--port", Integer.toString(port),
                "--bind", Loopback.HOST,
                "--save", "",
                "--appendonly", "no",
                // Redis 7 syncs a new replica without disk, after 5 seconds by default: at once here.
                "--repl-diskless-sync-delay", "0",
                "--dir", directory.toString());
        // No output listeners: the library reads standard output itself until the ready line; a listener
        // would read the same stream concurrently and could swallow that line.
        RedisServer process = new RedisServer(port, command, false);
        process.start();
        return process;
    }

    private static Path createDirectory() {
        try {
            return Files.createTempDirectory("fenced-embedded-redis-");
        } catch (IOException e) {
            throw new UncheckedIOException("Could not create a working directory for an embedded Redis", e);
        }
    }

    private void emptyDirectory() {
        try (Stream<Path> files = Files.walk(directory)) {
            for (Path path : files.sorted(Comparator.reverseOrder()).toList()) {
                if (!path.equals(directory)) {
                    Files.delete(path);
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("Could not empty " + directory + ", so a restart could reload its data", e);
        }
    }

    static void deleteQuietly(Path directory) {
        try (Stream<Path> files = Files.walk(directory)) {
            for (Path path : files.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(path);
            }
        } catch (IOException e) {
            LOG.warn("Could not delete {}", directory, e);
        }
    }
}
