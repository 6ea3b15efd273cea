package dev.fenced.torture;

import dev.fenced.testservices.EmbeddedRedis;
import dev.fenced.testservices.TcpProxy;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/**
 * The Redis side of a scenario: either the shared test server, which the nemesis never restarts or flushes,
 * or a primary and a replica of this suite's own ({@link EmbeddedRedis} processes on free ports), which it
 * restarts, flushes and fails over. Clients always reach Redis through {@link TcpProxy proxies} made here,
 * so that a failover can move them to the new primary.
 *
 * <p>The replica replicates through a proxy of its own: blackholing it cuts replication, so that writes
 * acknowledged by the primary are lost when the replica is promoted. Thread-safe for one nemesis thread.
 */
final class RedisTopology implements LockService {

    private static final Duration ADMIN_TIMEOUT = Duration.ofSeconds(10);

    /** The suffix of a lock's token counter key ({@code prefix{name}:fence}), one of the acquire script's keys. */
    static final String COUNTER_SUFFIX = ":fence";

    private final String sharedHost;
    private final int sharedPort;
    private final @Nullable EmbeddedRedis[] nodes;
    private final @Nullable TcpProxy replication;
    private final List<TcpProxy> clientProxies = new CopyOnWriteArrayList<>();
    private final RedisClient admin = RedisClient.create();
    private int primary; // index into nodes

    private RedisTopology(String sharedHost, int sharedPort, @Nullable EmbeddedRedis[] nodes, @Nullable TcpProxy replication) {
        this.sharedHost = sharedHost;
        this.sharedPort = sharedPort;
        this.nodes = nodes;
        this.replication = replication;
    }

    /** The shared server: only proxy faults (partitions, resets, delays) are allowed on it. */
    static RedisTopology shared(String host, int port) {
        return new RedisTopology(host, port, null, null);
    }

    /** A primary and a replica of our own, replicating through a proxy; returns once the replica is in sync. */
    static RedisTopology ownPair() {
        EmbeddedRedis first = EmbeddedRedis.start();
        EmbeddedRedis second;
        try {
            second = EmbeddedRedis.start();
        } catch (RuntimeException e) {
            first.close();
            throw e;
        }
        TcpProxy replication = TcpProxy.start("127.0.0.1", first.port());
        RedisTopology topology = new RedisTopology("", 0, new EmbeddedRedis[] {first, second}, replication);
        try {
            topology.attachReplica();
        } catch (RuntimeException e) {
            topology.close();
            throw e;
        }
        return topology;
    }

    private boolean ownsServers() {
        return nodes != null;
    }

    String primaryHost() {
        return nodes == null ? sharedHost : "127.0.0.1";
    }

    int primaryPort() {
        return nodes == null ? sharedPort : nodes[primary].port();
    }

    /** The Redis URI through {@code proxy}. */
    static String uriOf(TcpProxy proxy) {
        return "redis://" + proxy.host() + ":" + proxy.port();
    }

    /** A new proxy to the current primary for one client; moved along by {@link #failover()}. */
    @Override
    public TcpProxy clientProxy() {
        TcpProxy proxy = TcpProxy.start(primaryHost(), primaryPort());
        clientProxies.add(proxy);
        return proxy;
    }

    List<TcpProxy> clientProxies() {
        return List.copyOf(clientProxies);
    }

    @Override
    public Locker.Endpoint endpoint(TcpProxy proxy) {
        return new Locker.RedisEndpoint(uriOf(proxy));
    }

    /** The counter key is among the acquire script's keys, and no other script's. */
    @Override
    public String acquireMarker() {
        return COUNTER_SUFFIX;
    }

    /** The lock key's value is {@code owner:token}. */
    @Override
    public LockService.@Nullable Holder holder(String lockId) {
        String value = onPrimary(c -> c.get(lockId));
        if (value == null) {
            return null;
        }
        Long ttl = onPrimary(c -> c.pttl(lockId));
        return new Holder(value.substring(0, Math.max(0, value.lastIndexOf(':'))), ttl == null ? -1 : ttl);
    }

    /** The run's lock keys ({@code prefix{name}}; counters and other keys end otherwise) that exist now. */
    @Override
    public java.util.Map<String, LockService.Holder> heldLocks(String prefix) {
        java.util.Map<String, LockService.Holder> held = new java.util.LinkedHashMap<>();
        onPrimary(c -> {
            io.lettuce.core.ScanCursor cursor = io.lettuce.core.ScanCursor.INITIAL;
            do {
                io.lettuce.core.KeyScanCursor<String> page = c.scan(cursor, io.lettuce.core.ScanArgs.Builder.matches(prefix + "*").limit(500));
                page.getKeys().stream().filter(key -> key.endsWith("}")).forEach(key -> {
                    LockService.Holder holder = holder(key);
                    if (holder != null) {
                        held.put(key, holder);
                    }
                });
                cursor = page;
            } while (!cursor.isFinished());
            return null;
        });
        return held;
    }

    @Override
    public long counter(String lockId) {
        String value = onPrimary(c -> c.get(lockId + COUNTER_SUFFIX));
        return value == null ? 0 : Long.parseLong(value);
    }

    /** Redis runs keep their tables in the shared test database. */
    @Override
    public String ledgerUrl(String sharedDatabase) {
        return sharedDatabase;
    }

    /** On the shared server, deletes the run's keys; servers of our own go with their data. */
    @Override
    public void removeRunState(String prefix) {
        if (!ownsServers()) {
            deleteKeys(prefix);
        }
    }

    /** Restarts the primary without persistence: every key, counters included, is gone. */
    void restartPrimary() {
        requireOwn("restart").restart();
    }

    void flushAll() {
        onPrimary(c -> c.flushall());
    }

    void scriptFlush() {
        onPrimary(c -> c.scriptFlush());
    }

    /** Waits until the replica acknowledged every write so far; false if it did not within the timeout. */
    boolean awaitReplicated() {
        requireOwn("replicate");
        Long acked = onPrimary(c -> c.waitForReplication(1, 5_000));
        return acked != null && acked >= 1;
    }

    /** Stops replication traffic, so the primary's later writes never reach the replica. */
    void cutReplication() {
        requireOwn("cut replication");
        replicationProxy().blackhole();
    }

    /**
     * Promotes the replica (whatever it missed is lost), moves every client proxy to it and drops their
     * connections, then re-attaches the old primary as a replica of the new one.
     */
    void failover() {
        EmbeddedRedis[] pair = requireNodes();
        TcpProxy replication = replicationProxy();
        replication.blackhole();
        int promoted = 1 - primary;
        on(pair[promoted].port(), c -> c.replicaofNoOne());
        primary = promoted;
        for (TcpProxy proxy : clientProxies) {
            proxy.retarget("127.0.0.1", pair[promoted].port());
            proxy.resetAll();
        }
        attachReplica();
    }

    private void attachReplica() {
        EmbeddedRedis[] pair = requireNodes();
        TcpProxy replication = replicationProxy();
        replication.retarget("127.0.0.1", pair[primary].port());
        replication.resetAll();
        replication.resume();
        on(pair[1 - primary].port(), c -> c.replicaof("127.0.0.1", replication.port()));
        onPrimary(c -> c.set("torture:topology", "attached"));
        if (!awaitReplicated()) {
            throw new IllegalStateException("The replica on port " + pair[1 - primary].port()
                    + " did not catch up with the primary on port " + pair[primary].port() + " within 5 s");
        }
    }

    /** Deletes every key starting with {@code prefix} (a run's keys on the shared server, counters included). */
    private void deleteKeys(String prefix) {
        onPrimary(c -> {
            io.lettuce.core.ScanCursor cursor = io.lettuce.core.ScanCursor.INITIAL;
            do {
                io.lettuce.core.KeyScanCursor<String> page = c.scan(cursor, io.lettuce.core.ScanArgs.Builder.matches(prefix + "*").limit(500));
                if (!page.getKeys().isEmpty()) {
                    c.del(page.getKeys().toArray(new String[0]));
                }
                cursor = page;
            } while (!cursor.isFinished());
            return null;
        });
    }

    <T> T onPrimary(Function<RedisCommands<String, String>, T> command) {
        return on(primaryPort(), command);
    }

    private <T> T on(int port, Function<RedisCommands<String, String>, T> command) {
        RedisURI uri = RedisURI.builder().withHost(primaryHost()).withPort(port).withTimeout(ADMIN_TIMEOUT).build();
        try (StatefulRedisConnection<String, String> connection = admin.connect(uri)) {
            return command.apply(connection.sync());
        }
    }

    private EmbeddedRedis requireOwn(String what) {
        if (nodes == null) {
            throw new IllegalStateException("Refusing to " + what + " the shared Redis: only our own servers take such faults");
        }
        return nodes[primary];
    }

    private EmbeddedRedis[] requireNodes() {
        if (nodes == null) {
            throw new IllegalStateException("The shared Redis must not be restarted, flushed or failed over");
        }
        return nodes;
    }

    private TcpProxy replicationProxy() {
        if (replication == null) {
            throw new IllegalStateException("The shared Redis has no replica");
        }
        return replication;
    }

    @Override
    public void close() {
        List<AutoCloseable> all = new ArrayList<>(clientProxies);
        if (replication != null) {
            all.add(replication);
        }
        if (nodes != null) {
            all.addAll(List.of(nodes));
        }
        for (AutoCloseable closeable : all) {
            try {
                closeable.close();
            } catch (Exception e) {
                // Keep closing the rest; a process that survives is reaped by its own shutdown hook.
            }
        }
        admin.shutdown(Duration.ZERO, Duration.ofSeconds(2));
    }
}
