package dev.fenced.testservices;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One {@code redis-server} process with arbitrary options, for topologies (Redis Cluster, replicas,
 * Sentinel) that {@link EmbeddedRedis} does not cover. It listens on {@code 127.0.0.1} on a free port,
 * never persists data, and runs in a private working directory deleted on {@link #close()}.
 *
 * <p>The binary is the first available in the order {@link EmbeddedRedis} uses: the Redis 7 bundled in this
 * module, else {@code redis-server} from the {@code PATH}, else the Redis 6.2 of
 * {@code com.github.codemonstur:embedded-redis}; {@link #startRedis6} asks for Redis 6.2. A process that is still
 * running when the JVM exits is killed by a shutdown hook.
 *
 * <p>Thread-safe: state changes are serialized on this object.
 */
public final class RedisProcess implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(RedisProcess.class);
    private static final long READY_TIMEOUT_MILLIS = 15_000;

    private final int port;
    private final File executable;
    private final Path directory;
    private final List<String> options;
    private @Nullable Process process;
    private boolean closed;

    private RedisProcess(int port, File executable, Path directory, List<String> options) {
        this.port = port;
        this.executable = executable;
        this.directory = directory;
        this.options = options;
    }

    /**
     * Starts {@code redis-server} with {@code options} added to the defaults (port, bind, no persistence, replicas
     * synced at once, working directory) and returns once it answers {@code PING}.
     *
     * @param options further options, such as {@code "--cluster-enabled", "yes"}
     * @return the running process
     * @throws IllegalStateException if no binary works or the server did not become ready
     */
    public static RedisProcess start(String... options) {
        return startWithConfig(null, options);
    }

    /**
     * Starts {@code redis-server} with a configuration file written to its working directory first (for
     * Sentinel, which rewrites its file), then {@code options}.
     *
     * @param config the content of {@code redis.conf}, or {@code null} for none
     * @param options further options
     * @return the running process
     */
    public static RedisProcess startWithConfig(@Nullable String config, String... options) {
        return startWith(EmbeddedRedis.Binary.firstAvailable(), config, options);
    }

    /**
     * Starts the {@code redis-server} shipped in {@code com.github.codemonstur:embedded-redis} (Redis 6.2),
     * for tests of how the client behaves on servers before Redis 7.
     *
     * @param options further options
     * @return the running process
     */
    public static RedisProcess startRedis6(String... options) {
        File executable;
        try {
            executable = EmbeddedRedis.Binary.REDIS_6.executable();
        } catch (IOException e) {
            throw new IllegalStateException("The embedded-redis binary is not usable: " + e.getMessage(), e);
        }
        return startWith(executable, null, options);
    }

    private static RedisProcess startWith(File executable, @Nullable String config, String... options) {
        Path directory;
        try {
            directory = Files.createTempDirectory("fenced-redis-process-");
        } catch (IOException e) {
            throw new UncheckedIOException("Could not create a working directory for redis-server", e);
        }
        IllegalStateException failure = null;
        for (int attempt = 1; attempt <= 3; attempt++) {
            int port = Loopback.freePort();
            List<String> all = new ArrayList<>();
            if (config != null) {
                Path file = directory.resolve("redis.conf");
                try {
                    Files.writeString(file, config.replace("${port}", Integer.toString(port)));
                } catch (IOException e) {
                    throw new UncheckedIOException("Could not write " + file, e);
                }
                all.add(file.toString());
            }
            all.addAll(List.of("--port", Integer.toString(port), "--bind", Loopback.HOST, "--save", "",
                    "--appendonly", "no", "--repl-diskless-sync-delay", "0", "--dir", directory.toString(),
                    "--logfile", "redis.log"));
            all.addAll(List.of(options));
            RedisProcess redis = new RedisProcess(port, executable, directory, List.copyOf(all));
            try {
                redis.launch();
                return redis;
            } catch (IllegalStateException e) {
                failure = e;
                redis.kill();
            }
        }
        EmbeddedRedis.deleteQuietly(directory);
        throw failure;
    }

    private synchronized void launch() {
        List<String> command = new ArrayList<>();
        command.add(executable.getAbsolutePath());
        command.addAll(options);
        try {
            process = new ProcessBuilder(command)
                    .directory(directory.toFile())
                    .redirectErrorStream(true)
                    .redirectOutput(directory.resolve("stdout.log").toFile())
                    .start();
        } catch (IOException e) {
            throw new IllegalStateException("Could not run " + command + ": " + e.getMessage(), e);
        }
        Process started = process;
        Runtime.getRuntime().addShutdownHook(new Thread(started::destroyForcibly, "redis-process-reaper"));
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(READY_TIMEOUT_MILLIS);
        while (true) {
            if (!started.isAlive()) {
                throw new IllegalStateException("redis-server on port " + port + " exited with " + started.exitValue()
                        + ": " + log());
            }
            try {
                if ("PONG".equals(Resp.call(port, "PING"))) {
                    LOG.info("Started redis-server on port {} with {}", port, String.join(" ", options));
                    return;
                }
            } catch (UncheckedIOException | IllegalStateException notYet) {
                // Not listening yet, or still loading.
            }
            if (System.nanoTime() - deadline > 0) {
                throw new IllegalStateException("redis-server on port " + port + " did not answer PING within "
                        + READY_TIMEOUT_MILLIS + " ms: " + log());
            }
            sleep(20);
        }
    }

    /** Always {@code 127.0.0.1}. */
    public String host() {
        return Loopback.HOST;
    }

    /** The port, the same after {@link #restart()}. */
    public int port() {
        return port;
    }

    /** {@code redis://127.0.0.1:port}. */
    public String uri() {
        return "redis://" + Urls.authority(Loopback.HOST, port);
    }

    /** Whether the process runs. */
    public synchronized boolean isRunning() {
        return process != null && process.isAlive();
    }

    /**
     * Runs one command on a new connection and returns the reply: a String, a Long, a List or {@code null}.
     *
     * @param args the command and its arguments
     * @return the reply
     * @throws IllegalStateException if the server answers with an error
     * @throws UncheckedIOException if it cannot be reached
     */
    public @Nullable Object call(String... args) {
        return Resp.call(port, args);
    }

    /**
     * Kills the process with SIGKILL, as a crash would, and waits for it to exit. Its data is lost.
     */
    public synchronized void kill() {
        Process current = process;
        process = null;
        if (current != null) {
            current.destroyForcibly();
            try {
                current.waitFor(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            LOG.info("Killed redis-server on port {}", port);
        }
    }

    /**
     * Starts the process again on the same port with the same options.
     *
     * @throws IllegalStateException if closed or the new process does not become ready
     */
    public synchronized void restart() {
        if (closed) {
            throw new IllegalStateException("redis-server on port " + port + " is closed");
        }
        kill();
        launch();
    }

    /** The server's log so far (for failure messages). */
    public String log() {
        try {
            Path file = directory.resolve("redis.log");
            Path out = directory.resolve("stdout.log");
            String text = (Files.exists(file) ? Files.readString(file) : "") + (Files.exists(out) ? Files.readString(out) : "");
            return text.length() > 4000 ? text.substring(text.length() - 4000) : text;
        } catch (IOException e) {
            return "(log unreadable: " + e.getMessage() + ")";
        }
    }

    /** Kills the process and deletes its working directory. Idempotent. */
    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            kill();
            EmbeddedRedis.deleteQuietly(directory);
        }
    }

    @Override
    public String toString() {
        return "RedisProcess[" + uri() + "]";
    }

    static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("Interrupted", e);
        }
    }
}
