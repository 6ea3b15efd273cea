package dev.fenced.testservices;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/**
 * A primary, one replica and three Sentinels monitoring them as {@value #MASTER_NAME}, each a
 * {@link RedisProcess} on a loopback port. Sentinels consider the primary down after one second and fail
 * over to the replica; {@link #killPrimary()} and {@link #awaitFailover(java.time.Duration)} drive a failover.
 *
 * <p>Thread-safe: state changes are serialized on this object.
 */
public final class RedisSentinels implements AutoCloseable {

    /** The name under which the Sentinels monitor the primary. */
    public static final String MASTER_NAME = "fenced-primary";

    private static final long READY_TIMEOUT_MILLIS = 30_000;

    private final RedisProcess primary;
    private final RedisProcess replica;
    private final List<RedisProcess> sentinels;

    private RedisSentinels(RedisProcess primary, RedisProcess replica, List<RedisProcess> sentinels) {
        this.primary = primary;
        this.replica = replica;
        this.sentinels = sentinels;
    }

    /**
     * Starts the primary, the replica (returning once it is in sync) and three Sentinels (returning once
     * each knows the replica and the other two).
     *
     * @return the running group
     * @throws IllegalStateException if a process does not start or the group does not settle in time
     */
    public static RedisSentinels start() {
        List<RedisProcess> started = new ArrayList<>();
        try {
            // RedisProcess syncs replicas at once (no 5-second wait before a diskless full sync).
            RedisProcess primary = RedisProcess.start();
            started.add(primary);
            RedisProcess replica = RedisProcess.start("--replicaof", Loopback.HOST, Integer.toString(primary.port()));
            started.add(replica);
            await("the replica to sync", () -> String.valueOf(replica.call("INFO", "replication")).contains("master_link_status:up"));
            String config = "port ${port}\n"
                    + "sentinel monitor " + MASTER_NAME + " " + Loopback.HOST + " " + primary.port() + " 2\n"
                    + "sentinel down-after-milliseconds " + MASTER_NAME + " 1000\n"
                    + "sentinel failover-timeout " + MASTER_NAME + " 5000\n"
                    + "sentinel parallel-syncs " + MASTER_NAME + " 1\n";
            List<RedisProcess> sentinels = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                RedisProcess sentinel = RedisProcess.startWithConfig(config, "--sentinel");
                started.add(sentinel);
                sentinels.add(sentinel);
            }
            for (RedisProcess sentinel : sentinels) {
                await("Sentinel " + sentinel.port() + " to see the replica and the other Sentinels", () -> {
                    String master = String.valueOf(sentinel.call("SENTINEL", "MASTER", MASTER_NAME));
                    return master.contains("num-slaves, 1") && master.contains("num-other-sentinels, 2");
                });
            }
            return new RedisSentinels(primary, replica, List.copyOf(sentinels));
        } catch (RuntimeException e) {
            started.forEach(RedisProcess::close);
            throw e;
        }
    }

    /** The primary the group started with. */
    public RedisProcess primary() {
        return primary;
    }

    /** The replica the group started with, which becomes the primary on failover. */
    public RedisProcess replica() {
        return replica;
    }

    /** The three Sentinels. */
    public List<RedisProcess> sentinels() {
        return sentinels;
    }

    /** Lettuce's Sentinel URI of the group: {@code redis-sentinel://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3#name}. */
    public String sentinelUri() {
        return "redis-sentinel://" + sentinels.stream().map(s -> Urls.authority(Loopback.HOST, s.port()))
                .collect(Collectors.joining(",")) + "#" + MASTER_NAME;
    }

    /** The port of the primary that the first Sentinel names now. */
    public int currentPrimaryPort() {
        List<?> address = (List<?>) sentinels.get(0).call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME);
        return Integer.parseInt(String.valueOf(address.get(1)));
    }

    /** Kills the primary (SIGKILL), as a crash would. */
    public void killPrimary() {
        primary.kill();
    }

    /**
     * Waits until every Sentinel names the replica as the primary and the replica acts as one.
     *
     * @param timeout how long to wait
     * @throws IllegalStateException if that does not happen in time
     */
    public void awaitFailover(java.time.Duration timeout) {
        await("the Sentinels to promote the replica", () -> {
            for (RedisProcess sentinel : sentinels) {
                List<?> address = (List<?>) sentinel.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME);
                if (Integer.parseInt(String.valueOf(address.get(1))) != replica.port()) {
                    return false;
                }
            }
            return String.valueOf(replica.call("INFO", "replication")).contains("role:master");
        }, timeout.toMillis());
    }

    private static void await(String what, java.util.function.BooleanSupplier condition) {
        await(what, condition, READY_TIMEOUT_MILLIS);
    }

    private static void await(String what, java.util.function.BooleanSupplier condition, long timeoutMillis) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        RuntimeException last = null;
        while (System.nanoTime() - deadline < 0) {
            try {
                if (condition.getAsBoolean()) {
                    return;
                }
            } catch (RuntimeException e) {
                last = e;
            }
            RedisProcess.sleep(50);
        }
        throw new IllegalStateException("Timed out after " + timeoutMillis + " ms waiting for " + what, last);
    }

    /** Kills every process and deletes their directories. Idempotent. */
    @Override
    public synchronized void close() {
        for (RedisProcess sentinel : sentinels) {
            sentinel.close();
        }
        replica.close();
        primary.close();
    }
}
