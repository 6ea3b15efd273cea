package dev.fenced.bench;

import dev.fenced.testservices.RedisServerExtension;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;

/**
 * The Redis the harness measures against: a private {@code redis-server} process on a free loopback port
 * when the binary is installed, so that no other client's commands mix into the counters; otherwise the
 * server the tests would use.
 */
final class BenchRedis implements AutoCloseable {

    final String host;
    final int port;
    private final @org.jspecify.annotations.Nullable Process process;

    private BenchRedis(String host, int port, @org.jspecify.annotations.Nullable Process process) {
        this.host = host;
        this.port = port;
        this.process = process;
    }

    static BenchRedis start() {
        int port;
        try (ServerSocket socket = new ServerSocket(0)) {
            port = socket.getLocalPort();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        try {
            Process process = new ProcessBuilder("redis-server", "--port", Integer.toString(port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no").redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
            long giveUp = System.nanoTime() + Duration.ofSeconds(10).toNanos();
            while (System.nanoTime() < giveUp) {
                try (Socket ignored = new Socket("127.0.0.1", port)) {
                    return new BenchRedis("127.0.0.1", port, process);
                } catch (IOException notYet) {
                    Workloads.sleep(Duration.ofMillis(20));
                }
            }
            process.destroyForcibly();
            throw new IllegalStateException("redis-server did not start on port " + port);
        } catch (IOException notInstalled) {
            var shared = RedisServerExtension.server();
            return new BenchRedis(shared.host(), shared.port(), null);
        }
    }

    String uri() {
        return "redis://" + host + ":" + port;
    }

    @Override
    public void close() {
        if (process != null) {
            process.destroy();
        }
    }
}
