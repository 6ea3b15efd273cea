package dev.fenced.lock.internal.redis;

import io.lettuce.core.cluster.api.reactive.RedisClusterReactiveCommands;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * The connections of a {@link RedisLeaseStore} to one deployment: a single server (addressed directly or
 * found through Sentinel) or a Redis Cluster. Each connection is opened on first use and shared; the
 * server is inspected once when the command connection opens ({@link #server()}).
 *
 * <p>Implementations are thread-safe.
 */
interface RedisConnections {

    /**
     * The command connection, opened on first use. Fails with a Lettuce or timeout exception if it
     * cannot be opened, and with {@link IllegalStateException} if it is not connected now: a lock command
     * must never wait in a reconnect buffer.
     *
     * @return commands routed by key (to the slot's node on a cluster)
     */
    Mono<RedisClusterReactiveCommands<String, String>> commands();

    /**
     * The command connection's commands if it is connected now, without connecting or waiting.
     *
     * @return the commands, or {@code null} if the connection is not open (yet)
     */
    @Nullable RedisClusterReactiveCommands<String, String> openCommands();

    /**
     * Whether the Lettuce client was created by the store, with options that reject commands while
     * disconnected and time every command out after the command timeout.
     *
     * @return whether the store owns the client
     */
    boolean ownsClient();

    /**
     * A connection, separate from the command connection, to the one node that serves {@code key}: for an
     * acquire followed by {@code WAIT}, which must run on the connection of the write it waits for and
     * holds that connection while it waits, so it must not delay renewals.
     *
     * @param key a key of the lock
     * @return commands sent to that node only
     */
    Mono<RedisClusterReactiveCommands<String, String>> acknowledgedCommandsAt(String key);

    /**
     * Whether this is a Redis Cluster.
     *
     * @return whether keys are spread over slots
     */
    boolean cluster();

    /**
     * The node that serves {@code key} as far as this client knows, to group renewals per node.
     *
     * @param key a key
     * @return a node id, or the empty string on a single server
     */
    String nodeOf(String key);

    /**
     * What the command connection found when it opened; {@link ServerInfo#UNKNOWN} before.
     *
     * @return the server's version and role
     */
    ServerInfo server();

    /**
     * The server that the connection of {@code r} found when it last connected: the server that made a grant
     * sent on it.
     *
     * @param r a connection's commands
     * @return its server, or {@link ServerInfo#UNKNOWN}
     */
    ServerInfo serverOf(RedisClusterReactiveCommands<String, String> r);

    /**
     * Closes the connection that acquires with {@code WAIT} if {@code r} is its commands, so that the next
     * acquire opens one to the server the address leads to now.
     *
     * @param r the commands of a connection that reached a server that is no longer the lock service's
     */
    void discardAcknowledged(RedisClusterReactiveCommands<String, String> r);

    /**
     * Completes once the server that answers now has been compared with the one of the first connect: at once
     * while connected, and after a reconnect once {@code INFO} has answered (or failed). Grants are emitted only
     * after it, so a change of server is reported before a lease granted by the new one.
     *
     * @return completion, never an error
     */
    Mono<Void> verified();

    /**
     * Whether releases are notified with sharded pub/sub where the server has it ({@code SPUBLISH}, falling
     * back to {@code PUBLISH} in the script): on a cluster, where a plain {@code PUBLISH} is broadcast to every
     * node. Subscribers learn what the server has from its answer to {@code SSUBSCRIBE}, so all clients of a
     * deployment agree, whatever each may read of the server.
     *
     * @return whether notifications try sharded pub/sub
     */
    boolean shardedPubSub();

    /**
     * Subscribes to a release channel on the pub/sub connection, opened on first use.
     *
     * @param channel the channel
     * @return completes when the server confirmed
     */
    Mono<Void> subscribe(String channel);

    /**
     * Unsubscribes from a release channel.
     *
     * @param channel the channel
     * @return completes when sent
     */
    Mono<Void> unsubscribe(String channel);

    /**
     * Closes the connections and, if owned, the Lettuce client.
     *
     * @return completion; never errors
     */
    Mono<Void> close();

    /**
     * What the store learns from the server when it connects.
     *
     * @param version the {@code redis_version} (Valkey reports a compatible one), or the empty string
     * @param role {@code master}, {@code slave} or the empty string if unknown
     * @param runId the {@code run_id}, new at every start of the server, or the empty string
     * @param replicationId the {@code master_replid}, new when the server starts without the data of its last
     *     run or becomes a primary in a failover, or the empty string
     */
    record ServerInfo(String version, String role, String runId, String replicationId) {

        /** Nothing known yet. */
        static final ServerInfo UNKNOWN = new ServerInfo("", "", "", "");

        /**
         * Version and role only.
         *
         * @param version the version
         * @param role the role
         */
        ServerInfo(String version, String role) {
            this(version, role, "", "");
        }

        /**
         * Parses the {@code INFO server} and {@code INFO replication} sections.
         *
         * @param info the text of both sections, or {@code null}
         * @return what they say
         */
        static ServerInfo parse(@Nullable String info) {
            String version = "";
            String role = "";
            String runId = "";
            String replicationId = "";
            if (info != null) {
                for (String line : info.split("\r?\n")) {
                    int colon = line.indexOf(':');
                    String value = colon < 0 ? "" : line.substring(colon + 1).trim();
                    switch (colon < 0 ? "" : line.substring(0, colon)) {
                        case "redis_version" -> version = value;
                        case "role" -> role = value;
                        case "run_id" -> runId = value;
                        case "master_replid" -> replicationId = value;
                        default -> { }
                    }
                }
            }
            return new ServerInfo(version, role, runId, replicationId);
        }

        /**
         * How this server differs from {@code earlier} in identity: another process ({@code run_id}) or another
         * replication history ({@code master_replid}). Either means that the locks {@code earlier} held may be
         * gone: a restart, a failover, a reload of older data.
         *
         * @param earlier what the server said before
         * @return a description of the change, or the empty string when the identity is the same or unknown
         */
        String identityChangeFrom(ServerInfo earlier) {
            if (!earlier.runId.isEmpty() && !runId.isEmpty() && !earlier.runId.equals(runId)) {
                return "run_id changed from " + earlier.runId + " to " + runId;
            }
            if (!earlier.replicationId.isEmpty() && !replicationId.isEmpty() && !earlier.replicationId.equals(replicationId)) {
                return "master_replid changed from " + earlier.replicationId + " to " + replicationId;
            }
            return "";
        }

        /**
         * Whether the server is at least {@code major}.
         *
         * @param major a major version
         * @return whether the version is known and at least that
         */
        boolean atLeast(int major) {
            int dot = version.indexOf('.');
            try {
                return !version.isEmpty() && Integer.parseInt(dot < 0 ? version : version.substring(0, dot)) >= major;
            } catch (NumberFormatException e) {
                return false;
            }
        }
    }

    /** What the pub/sub connection reports to the store. Called on the connection's event loop. */
    interface Listener {

        /**
         * A release notification arrived.
         *
         * @param channel its channel
         */
        void released(String channel);

        /**
         * A subscription ended: because the store unsubscribed, or because the server ended it (a sharded
         * channel whose slot moved to another node).
         *
         * @param channel the channel
         */
        void unsubscribed(String channel);

        /**
         * The command connection reconnected to a server of another identity (restarted, failed over, or
         * reloaded): every lock the earlier server held may be gone. Called before
         * {@link RedisConnections#verified()} completes.
         *
         * @param change what changed, for messages
         */
        void serverChanged(String change);
    }
}
