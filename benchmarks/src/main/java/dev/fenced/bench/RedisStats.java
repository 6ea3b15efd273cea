package dev.fenced.bench;

import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;

/** Reads the server's command counters (INFO commandstats) before and after a workload. */
final class RedisStats implements ServerCounters, AutoCloseable {

    /** The commands a client sends as requests of its own, not from inside a script. */
    private static final java.util.List<String> REQUESTS =
            java.util.List.of("evalsha", "eval", "subscribe", "unsubscribe", "ssubscribe", "sunsubscribe");

    private final RedisClient client;
    private final StatefulRedisConnection<String, String> connection;

    RedisStats(String redisUri) {
        this.client = RedisClient.create(redisUri);
        this.connection = client.connect();
    }

    @Override
    public long requests() {
        return requests(java.util.Map.of(), callsByCommand());
    }

    @Override
    public long commands() {
        return totalCalls();
    }

    /** Commands the server has executed, all kinds, not counting this reader's INFO calls. */
    long totalCalls() {
        long total = 0;
        for (String line : connection.sync().info("commandstats").split("\r?\n")) {
            if (line.startsWith("cmdstat_") && !line.startsWith("cmdstat_info:")) {
                int start = line.indexOf("calls=") + 6;
                int end = line.indexOf(',', start);
                total += Long.parseLong(line.substring(start, end));
            }
        }
        return total;
    }

    /** Calls per command name, for a breakdown of what a workload sent. */
    java.util.Map<String, Long> callsByCommand() {
        java.util.Map<String, Long> calls = new java.util.TreeMap<>();
        for (String line : connection.sync().info("commandstats").split("\r?\n")) {
            if (line.startsWith("cmdstat_")) {
                int start = line.indexOf("calls=") + 6;
                calls.put(line.substring(8, line.indexOf(':')), Long.parseLong(line.substring(start, line.indexOf(',', start))));
            }
        }
        return calls;
    }

    /**
     * Microseconds the server spent executing commands sent by clients ({@code usec} of {@code INFO commandstats}):
     * scripts and pub/sub commands, including the commands scripts ran, excluding this reader's {@code INFO}.
     */
    long requestMicros() {
        long total = 0;
        for (String line : connection.sync().info("commandstats").split("\r?\n")) {
            String command = line.startsWith("cmdstat_") ? line.substring(8, line.indexOf(':')) : "";
            if (REQUESTS.contains(command)) {
                int start = line.indexOf("usec=") + 5;
                total += Long.parseLong(line.substring(start, line.indexOf(',', start)));
            }
        }
        return total;
    }

    /**
     * Client requests (round trips) among the calls between two snapshots: scripts and pub/sub commands, not
     * the commands scripts run inside Redis, which {@code INFO commandstats} counts too.
     */
    static long requests(java.util.Map<String, Long> before, java.util.Map<String, Long> after) {
        long total = 0;
        for (String command : REQUESTS) {
            total += after.getOrDefault(command, 0L) - before.getOrDefault(command, 0L);
        }
        return total;
    }

    @Override
    public double cpuSeconds() {
        double seconds = 0;
        for (String line : connection.sync().info("cpu").split("\r?\n")) {
            if (line.startsWith("used_cpu_sys:") || line.startsWith("used_cpu_user:")) {
                seconds += Double.parseDouble(line.substring(line.indexOf(':') + 1).trim());
            }
        }
        return seconds;
    }

    String serverVersion() {
        for (String line : connection.sync().info("server").split("\r?\n")) {
            if (line.startsWith("redis_version:")) {
                return line.substring("redis_version:".length()).trim();
            }
        }
        return "unknown";
    }

    @Override
    public void close() {
        connection.close();
        client.shutdown();
    }
}
