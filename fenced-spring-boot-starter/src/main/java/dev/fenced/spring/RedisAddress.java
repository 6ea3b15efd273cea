package dev.fenced.spring;

import io.lettuce.core.RedisURI;
import java.util.List;

/**
 * Where the auto-configured client connects: one server (standalone, or a primary found through Sentinel),
 * or the nodes of a Redis Cluster. Credentials, TLS and the database travel in the URIs. Immutable.
 */
sealed interface RedisAddress {

    /**
     * One server, or the primary that Sentinels name.
     *
     * @param uri the Lettuce URI, with credentials, TLS and database
     */
    record Server(RedisURI uri) implements RedisAddress {
    }

    /**
     * Seed nodes of a Redis Cluster; the client discovers the others.
     *
     * @param nodes at least one node, each with the credentials and TLS of the cluster
     */
    record Cluster(List<RedisURI> nodes) implements RedisAddress {

        /** Copies the nodes. */
        public Cluster {
            nodes = List.copyOf(nodes);
        }
    }
}
