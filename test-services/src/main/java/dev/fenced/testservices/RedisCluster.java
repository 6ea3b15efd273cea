package dev.fenced.testservices;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

/**
 * A Redis Cluster of primaries only, each a {@link RedisProcess} on a loopback port, with the 16,384
 * slots split evenly. Built with cluster commands ({@code CLUSTER ADDSLOTS}, {@code CLUSTER MEET}), so it
 * needs no {@code redis-cli}, and ready in about a second. {@link #moveSlot} reshards one slot with its
 * keys, as {@code redis-cli --cluster reshard} does.
 *
 * <p>Thread-safe for reading; {@link #moveSlot} and {@link #close()} are serialized on this object.
 */
public final class RedisCluster implements AutoCloseable {

    /** The number of hash slots of a Redis Cluster. */
    public static final int SLOTS = 16_384;

    private static final long READY_TIMEOUT_MILLIS = 20_000;

    private final List<RedisProcess> nodes;
    private final List<String> ids;

    private RedisCluster(List<RedisProcess> nodes, List<String> ids) {
        this.nodes = nodes;
        this.ids = ids;
    }

    /**
     * Starts {@code primaries} nodes, gives each an even share of the slots, joins them and returns once
     * every node reports {@code cluster_state:ok} and knows every other.
     *
     * @param primaries the number of primaries, at least 1
     * @return the running cluster
     * @throws IllegalStateException if a node does not start or the cluster does not form in time
     */
    public static RedisCluster start(int primaries) {
        return start(primaries, false);
    }

    /**
     * As {@link #start(int)}, on the {@code redis-server} shipped in {@code embedded-redis} (Redis 6.2),
     * for tests of how the client behaves on a cluster before Redis 7 (no sharded pub/sub, no
     * cross-slot script flags).
     *
     * @param primaries the number of primaries, at least 1
     * @return the running cluster
     */
    public static RedisCluster startRedis6(int primaries) {
        return start(primaries, true);
    }

    private static RedisCluster start(int primaries, boolean redis6) {
        if (primaries < 1) {
            throw new IllegalArgumentException("primaries must be at least 1, was " + primaries);
        }
        List<RedisProcess> nodes = new ArrayList<>();
        try {
            for (int i = 0; i < primaries; i++) {
                String[] options = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                    "--cluster-node-timeout", "2000"};
                nodes.add(redis6 ? RedisProcess.startRedis6(options) : RedisProcess.start(options));
            }
            List<String> ids = new ArrayList<>();
            for (int i = 0; i < primaries; i++) {
                RedisProcess node = nodes.get(i);
                ids.add((String) node.call("CLUSTER", "MYID"));
                int from = i * SLOTS / primaries;
                int to = (i + 1) * SLOTS / primaries;
                List<String> args = new ArrayList<>(List.of("CLUSTER", "ADDSLOTS"));
                for (int slot = from; slot < to; slot++) {
                    args.add(Integer.toString(slot));
                }
                node.call(args.toArray(String[]::new));
            }
            for (int i = 1; i < primaries; i++) {
                nodes.get(0).call("CLUSTER", "MEET", Loopback.HOST, Integer.toString(nodes.get(i).port()));
            }
            RedisCluster cluster = new RedisCluster(List.copyOf(nodes), List.copyOf(ids));
            cluster.awaitConsistent();
            return cluster;
        } catch (RuntimeException e) {
            nodes.forEach(RedisProcess::close);
            throw e;
        }
    }

    /** The nodes, in slot order: node {@code i} first owned the {@code i}-th share of the slots. */
    public List<RedisProcess> nodes() {
        return nodes;
    }

    /** The cluster node id of node {@code index}. */
    public String nodeId(int index) {
        return ids.get(index);
    }

    /** A seed URI for a cluster client: {@code redis://127.0.0.1:port} of the first node. */
    public String seedUri() {
        return nodes.get(0).uri();
    }

    /** The hash slot of {@code key}, as the cluster computes it. */
    public int slotOf(String key) {
        return ((Long) nodes.get(0).call("CLUSTER", "KEYSLOT", key)).intValue();
    }

    /** The index of the node that owns {@code slot} now, as the first node sees it. */
    public int ownerOf(int slot) {
        @SuppressWarnings("unchecked")
        List<List<Object>> ranges = (List<List<Object>>) nodes.get(0).call("CLUSTER", "SLOTS");
        for (List<Object> range : ranges) {
            if (slot >= (Long) range.get(0) && slot <= (Long) range.get(1)) {
                int port = ((Long) ((List<?>) range.get(2)).get(1)).intValue();
                for (int i = 0; i < nodes.size(); i++) {
                    if (nodes.get(i).port() == port) {
                        return i;
                    }
                }
            }
        }
        throw new IllegalStateException("No node owns slot " + slot);
    }

    /**
     * Moves {@code slot}, with its keys, from the node that owns it to node {@code target}: marks it
     * importing and migrating, {@code MIGRATE}s the keys in batches, then assigns it on every node. While it
     * runs, clients see {@code ASK} redirections; afterwards {@code MOVED}.
     *
     * @param slot the slot
     * @param target the index of the node to move it to
     * @return the number of keys moved
     */
    public synchronized int moveSlot(int slot, int target) {
        int source = ownerOf(slot);
        if (source == target) {
            return 0;
        }
        RedisProcess from = nodes.get(source);
        RedisProcess to = nodes.get(target);
        String s = Integer.toString(slot);
        to.call("CLUSTER", "SETSLOT", s, "IMPORTING", ids.get(source));
        from.call("CLUSTER", "SETSLOT", s, "MIGRATING", ids.get(target));
        int moved = 0;
        while (true) {
            @SuppressWarnings("unchecked")
            List<String> keys = (List<String>) from.call("CLUSTER", "GETKEYSINSLOT", s, "100");
            if (keys == null || keys.isEmpty()) {
                break;
            }
            List<String> args = new ArrayList<>(List.of("MIGRATE", Loopback.HOST, Integer.toString(to.port()), "", "0",
                    "5000", "KEYS"));
            args.addAll(keys);
            from.call(args.toArray(String[]::new));
            moved += keys.size();
        }
        to.call("CLUSTER", "SETSLOT", s, "NODE", ids.get(target));
        from.call("CLUSTER", "SETSLOT", s, "NODE", ids.get(target));
        for (int i = 0; i < nodes.size(); i++) {
            if (i != source && i != target) {
                nodes.get(i).call("CLUSTER", "SETSLOT", s, "NODE", ids.get(target));
            }
        }
        return moved;
    }

    private void awaitConsistent() {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(READY_TIMEOUT_MILLIS);
        String last = "";
        while (System.nanoTime() - deadline < 0) {
            boolean ready = true;
            for (RedisProcess node : nodes) {
                String info = String.valueOf(node.call("CLUSTER", "INFO"));
                last = node.port() + ": " + info.lines().limit(6).toList();
                if (!info.contains("cluster_state:ok") || !info.contains("cluster_known_nodes:" + nodes.size())
                        || !info.contains("cluster_slots_ok:" + SLOTS)) {
                    ready = false;
                    break;
                }
            }
            if (ready) {
                return;
            }
            RedisProcess.sleep(50);
        }
        throw new IllegalStateException("The cluster did not become consistent within " + READY_TIMEOUT_MILLIS + " ms; last: "
                + last);
    }

    /** Kills every node and deletes their directories. Idempotent. */
    @Override
    public synchronized void close() {
        @Nullable RuntimeException failure = null;
        for (RedisProcess node : nodes) {
            try {
                node.close();
            } catch (RuntimeException e) {
                failure = e;
            }
        }
        if (failure != null) {
            throw failure;
        }
    }

    @Override
    public String toString() {
        return "RedisCluster" + nodes.stream().map(RedisProcess::port).toList();
    }
}
