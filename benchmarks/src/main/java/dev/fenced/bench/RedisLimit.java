package dev.fenced.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The physical limit: {@code redis-benchmark} running the bare lock's two scripts ({@code EVALSHA}) on the
 * same server, one connection, with and without pipelining.
 */
final class RedisLimit {

    private static final Pattern RATE = Pattern.compile("([0-9.]+) requests per second");

    private RedisLimit() {
    }

    /**
     * Requests per second of one script, or -1 when {@code redis-benchmark} is not installed.
     *
     * @param host the server
     * @param port its port
     * @param requests how many requests
     * @param pipeline requests per round trip
     * @param command the command and its arguments
     * @return requests per second
     */
    static double requestsPerSecond(String host, int port, int requests, int pipeline, String... command) {
        List<String> args = new ArrayList<>(List.of("redis-benchmark", "-h", host, "-p", Integer.toString(port),
                "-n", Integer.toString(requests), "-c", "1", "-P", Integer.toString(pipeline), "-r", "100000000", "-q"));
        args.addAll(List.of(command));
        try {
            Process process = new ProcessBuilder(args).redirectErrorStream(true).start();
            String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!process.waitFor(5, TimeUnit.MINUTES) || process.exitValue() != 0) {
                throw new IllegalStateException("redis-benchmark failed: " + output);
            }
            Matcher m = RATE.matcher(output);
            double last = -1;
            while (m.find()) {
                last = Double.parseDouble(m.group(1));
            }
            if (last < 0) {
                throw new IllegalStateException("Cannot read redis-benchmark's rate from: " + output);
            }
            return last;
        } catch (IOException e) {
            return -1; // not installed
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }
}
