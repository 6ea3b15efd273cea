package dev.fenced.torture;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * A {@code redis-server} of the run's own whose clock the nemesis steps: started with libfaketime preloaded (Debian's
 * {@code faketime} package), which reads the clock's offset from a file on every call
 * ({@code FAKETIME_TIMESTAMP_FILE}, {@code FAKETIME_NO_CACHE=1}). Only the wall clock is faked
 * ({@code FAKETIME_DONT_FAKE_MONOTONIC=1}): that is the clock of {@code TIME} (the default tokens) and of key expiry
 * ({@code PX}); Redis 7's monotonic clock, which drives its timers, runs on. glibc's malloc is preloaded before
 * libfaketime because Debian's {@code redis-server} allocates with jemalloc, whose start-up reads the clock while
 * libfaketime is itself starting, and libfaketime 0.9.10 then aborts the process ("unexpected recursive calls to
 * clock_gettime()"). The harness reaches the server as {@link RedisTopology#shared} does, through proxies;
 * {@link #restart()} stops it and starts it again on the same port with an empty data set (no persistence), so the
 * token counters are gone. Thread-safe for one nemesis thread.
 */
final class FakeClockRedis extends ForwardingLockService {

    /** Debian's libfaketime, of the {@code faketime} package. */
    static final Path LIBFAKETIME = Path.of("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1");

    /** glibc's malloc as a preloadable library (glibc 2.34 and later). */
    private static final Path GLIBC_MALLOC = Path.of("/lib/x86_64-linux-gnu/libc_malloc_debug.so.0");

    private static final String REDIS_SERVER = "/usr/bin/redis-server";
    private static final Duration START_TIMEOUT = Duration.ofSeconds(10);

    private final int port;
    private final Path clockFile;
    private final RedisClient admin = RedisClient.create();
    private Process process;
    private double offsetSeconds;

    private FakeClockRedis(int port, Path clockFile, Process process) {
        super(RedisTopology.shared("127.0.0.1", port));
        this.port = port;
        this.clockFile = clockFile;
        this.process = process;
    }

    /**
     * Starts the server with its clock at the real time.
     *
     * @throws IllegalStateException if libfaketime or {@code redis-server} is missing: the clock faults cannot run
     */
    static FakeClockRedis start() {
        for (Path required : List.of(LIBFAKETIME, GLIBC_MALLOC, Path.of(REDIS_SERVER))) {
            if (!Files.isRegularFile(required)) {
                throw new IllegalStateException(required + " is missing: the clock faults need Debian's faketime and "
                        + "redis-server packages (apt-get install faketime redis-server)");
            }
        }
        try {
            Path clockFile = Files.createTempFile("torture-faketime-", ".rc");
            writeOffset(clockFile, 0);
            int port = freePort();
            FakeClockRedis redis = new FakeClockRedis(port, clockFile, launch(port, clockFile));
            Runtime.getRuntime().addShutdownHook(new Thread(redis::stopProcess, "torture-fake-clock-reaper"));
            redis.awaitUp();
            return redis;
        } catch (IOException e) {
            throw new UncheckedIOException("Could not start redis-server under libfaketime", e);
        }
    }

    private static Process launch(int port, Path clockFile) throws IOException {
        ProcessBuilder builder = new ProcessBuilder(REDIS_SERVER, "--port", Integer.toString(port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--protected-mode", "no")
                .redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.DISCARD);
        builder.environment().put("LD_PRELOAD", GLIBC_MALLOC + " " + LIBFAKETIME);
        builder.environment().put("FAKETIME_TIMESTAMP_FILE", clockFile.toString());
        builder.environment().put("FAKETIME_NO_CACHE", "1");
        builder.environment().put("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        return builder.start();
    }

    private static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0)) {
            return socket.getLocalPort();
        }
    }

    /** Sets the server's clock {@code offsetSeconds} from the real time (negative: behind); effective at once. */
    synchronized void setClock(double offsetSeconds) {
        writeOffset(clockFile, offsetSeconds);
        this.offsetSeconds = offsetSeconds;
    }

    /** The server clock's current offset from the real time, in seconds. */
    synchronized double clockOffset() {
        return offsetSeconds;
    }

    private static void writeOffset(Path file, double offsetSeconds) {
        String text = String.format(Locale.ROOT, "%+.6f%n", offsetSeconds);
        try {
            // Renamed into place, so that the server never reads half a line.
            Path next = file.resolveSibling(file.getFileName() + ".next");
            Files.writeString(next, text, StandardCharsets.US_ASCII);
            Files.move(next, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            throw new UncheckedIOException("Could not write the fake clock file " + file, e);
        }
    }

    /** The server's {@code TIME}, in microseconds: its faked wall clock. */
    long serverTimeMicros() {
        List<String> time = command(c -> c.sync().time());
        return Long.parseLong(time.get(0)) * 1_000_000 + Long.parseLong(time.get(1));
    }

    /** Stops the server and starts it again on the same port with an empty data set, its clock as it is set now. */
    synchronized void restart() {
        stopProcess();
        try {
            process = launch(port, clockFile);
        } catch (IOException e) {
            throw new UncheckedIOException("Could not restart redis-server under libfaketime", e);
        }
        awaitUp();
    }

    private void awaitUp() {
        long giveUp = System.nanoTime() + START_TIMEOUT.toNanos();
        RuntimeException last = null;
        while (System.nanoTime() - giveUp < 0) {
            if (!process.isAlive()) {
                throw new IllegalStateException("redis-server under libfaketime exited with " + process.exitValue());
            }
            try {
                if ("PONG".equals(command(c -> c.sync().ping()))) {
                    return;
                }
            } catch (RuntimeException e) {
                last = e;
            }
            try {
                TimeUnit.MILLISECONDS.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("Interrupted while redis-server started", e);
            }
        }
        throw new IllegalStateException("redis-server under libfaketime did not answer within " + START_TIMEOUT, last);
    }

    private <T> T command(java.util.function.Function<StatefulRedisConnection<String, String>, T> command) {
        RedisURI uri = RedisURI.builder().withHost("127.0.0.1").withPort(port).withTimeout(Duration.ofSeconds(2)).build();
        try (StatefulRedisConnection<String, String> connection = admin.connect(uri)) {
            return command.apply(connection);
        }
    }

    private synchronized void stopProcess() {
        Process running = process;
        if (running != null && running.isAlive()) {
            running.destroy();
            try {
                if (!running.waitFor(5, TimeUnit.SECONDS)) {
                    running.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
                }
            } catch (InterruptedException e) {
                running.destroyForcibly();
                Thread.currentThread().interrupt();
            }
        }
    }

    @Override
    public void close() {
        try {
            super.close();
        } finally {
            stopProcess();
            admin.shutdown(Duration.ZERO, Duration.ofSeconds(2));
            try {
                Files.deleteIfExists(clockFile);
            } catch (IOException e) {
                // A temporary file; the machine's cleanup takes it.
            }
        }
    }

    @Override
    public String toString() {
        return "redis-server under libfaketime on port " + port + ", clock " + String.format(Locale.ROOT, "%+.3f s", offsetSeconds);
    }
}
