package dev.fenced.lock.internal.redis;

import io.lettuce.core.cluster.api.reactive.RedisClusterReactiveCommands;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/** Warnings about server settings that would break the lock's guarantees, logged once per connection. */
final class ServerChecks {

    private static final Logger log = Loggers.getLogger(ServerChecks.class);

    private ServerChecks() {
    }

    /**
     * Warns if the server is a replica (lock commands would fail with {@code READONLY}) or may evict keys
     * under memory pressure. Runs in the background; a server that refuses {@code CONFIG} (managed
     * services) is only logged at debug level.
     *
     * @param r the connection
     * @param info what the server said of itself
     * @param keyPrefix the key prefix, for the message
     */
    static void warnIfUnsafe(RedisClusterReactiveCommands<String, String> r, RedisConnections.ServerInfo info, String keyPrefix) {
        if ("slave".equals(info.role())) {
            log.warn("The Redis server for locks is a replica: acquires will fail with READONLY. Point the client at "
                    + "the primary, or use a Sentinel URI (redis-sentinel://...) to follow it.");
        }
        // One parameter per CONFIG GET: servers before Redis 7 take only one.
        Mono.zip(r.configGet("maxmemory-policy"), r.configGet("maxmemory"))
                .subscribe(config -> {
                    String policy = config.getT1().getOrDefault("maxmemory-policy", "noeviction");
                    String maxmemory = config.getT2().getOrDefault("maxmemory", "0");
                    if (evicts(policy, maxmemory)) {
                        log.warn("Redis maxmemory-policy is '{}' with maxmemory {}: under memory pressure Redis may evict "
                                + "lock keys (a lease silently ends) or token counters (tokens restart). Set "
                                + "maxmemory-policy to noeviction for the keys prefixed '{}'.", policy, maxmemory, keyPrefix);
                    }
                }, e -> log.debug("Cannot read the eviction policy (CONFIG GET not allowed?): {}", e.toString()));
    }

    /**
     * Whether a policy can evict the lock's keys: any policy but {@code noeviction} once a memory limit is
     * set. The {@code volatile-*} policies evict lock keys (they expire); {@code allkeys-*} also evict the
     * token counters.
     *
     * @param policy the {@code maxmemory-policy}
     * @param maxmemory the {@code maxmemory}
     * @return whether keys can be evicted
     */
    static boolean evicts(String policy, String maxmemory) {
        return !"noeviction".equals(policy) && !"0".equals(maxmemory);
    }
}
