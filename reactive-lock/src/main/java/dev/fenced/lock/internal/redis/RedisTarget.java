package dev.fenced.lock.internal.redis;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.RedisClusterClient;
import java.util.List;
import java.util.Objects;

/**
 * Where the locks live, and who owns the Lettuce client that reaches them: the one description of a Redis
 * deployment that the builder, the store and its connections share.
 */
public sealed interface RedisTarget {

    /**
     * One server ({@code redis://}) or a Sentinel group ({@code redis-sentinel://}), through a Lettuce client
     * the store creates, configures and shuts down.
     *
     * @param uri the server, or the Sentinels and the primary's name
     */
    record Server(RedisURI uri) implements RedisTarget {

        /** Validates. */
        public Server {
            Objects.requireNonNull(uri, "uri");
        }
    }

    /**
     * One server or Sentinel group, through the application's Lettuce client, left open on close.
     *
     * @param client the Lettuce client
     * @param uri the server, or the Sentinels and the primary's name
     */
    record SharedServer(RedisClient client, RedisURI uri) implements RedisTarget {

        /** Validates. */
        public SharedServer {
            Objects.requireNonNull(client, "client");
            Objects.requireNonNull(uri, "uri");
        }
    }

    /**
     * A Redis Cluster, given by some of its nodes, through a cluster client the store creates and owns.
     *
     * @param seeds at least one node
     */
    record Cluster(List<RedisURI> seeds) implements RedisTarget {

        /** Validates and copies. */
        public Cluster {
            seeds = List.copyOf(seeds);
            if (seeds.isEmpty()) {
                throw new IllegalArgumentException("At least one cluster node URI is required");
            }
        }
    }

    /**
     * A Redis Cluster, through the application's cluster client, left open on close.
     *
     * @param client the cluster client
     */
    record SharedCluster(RedisClusterClient client) implements RedisTarget {

        /** Validates. */
        public SharedCluster {
            Objects.requireNonNull(client, "client");
        }
    }
}
