package dev.fenced.torture;

import dev.fenced.lock.PostgresLeaseTable;
import dev.fenced.testservices.TcpProxy;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryOptions;
import io.r2dbc.spi.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The PostgreSQL side of a scenario on the PostgreSQL lease store: a lease table of the run's own, in the shared test
 * database (which the nemesis never restarts) or in a {@link RestartablePostgres} server of the run's own (which it
 * restarts). The run's account and audit tables live in the same database, the setup the README recommends: a grant
 * and the fenced writes under it then commit in one database, and whatever survives a restart or failover of it is a
 * prefix of what it committed. Lock clients reach the database through {@link TcpProxy proxies} made here, one per
 * client; the account and audit tables are written on direct connections, so that a fault cuts a worker's lock client
 * off while its stale writes still reach storage, the case the fence exists for.
 *
 * <p>Administrative statements run on a connection of their own each, so that they work across restarts. Thread-safe
 * for one nemesis thread.
 */
final class PostgresTopology implements LockService {

    private static final Duration ADMIN_TIMEOUT = Duration.ofSeconds(10);

    /** In the acquire statement ({@code INSERT ... ON CONFLICT (lock_id) DO UPDATE}) and no other of the store. */
    private static final String ACQUIRE_MARKER = "ON CONFLICT (lock_id)";

    private final String databaseUrl;
    private final String host;
    private final int port;
    private final @Nullable RestartablePostgres own;
    private final PostgresLeaseTable table;
    private final ConnectionFactory admin;
    private final List<TcpProxy> clientProxies = new CopyOnWriteArrayList<>();

    private PostgresTopology(String databaseUrl, @Nullable RestartablePostgres own) {
        ConnectionFactoryOptions options = ConnectionFactoryOptions.parse(databaseUrl);
        this.databaseUrl = databaseUrl;
        this.host = (String) options.getRequiredValue(ConnectionFactoryOptions.HOST);
        Object port = options.getValue(ConnectionFactoryOptions.PORT);
        this.port = port == null ? 5432 : Integer.parseInt(port.toString());
        this.own = own;
        this.table = PostgresLeaseTable.named("torture_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12)
                + "_lease");
        this.admin = ConnectionFactories.get(databaseUrl);
    }

    /** A lease table of the run's own in the shared database at {@code r2dbcUrl}: only proxy faults are allowed. */
    static PostgresTopology shared(String r2dbcUrl) {
        return withTable(new PostgresTopology(r2dbcUrl, null));
    }

    /** A server of the run's own, which {@link #restart} restarts, with the lease table in its database. */
    static PostgresTopology own() {
        RestartablePostgres server = RestartablePostgres.start();
        try {
            return withTable(new PostgresTopology(server.r2dbcUrl(), server));
        } catch (RuntimeException e) {
            server.close();
            throw e;
        }
    }

    private static PostgresTopology withTable(PostgresTopology topology) {
        try {
            topology.table.create(topology.admin).block(ADMIN_TIMEOUT);
        } catch (RuntimeException e) {
            topology.close();
            throw e;
        }
        return topology;
    }

    String leaseTable() {
        return table.name();
    }

    @Override
    public TcpProxy clientProxy() {
        TcpProxy proxy = TcpProxy.start(host, port);
        clientProxies.add(proxy);
        return proxy;
    }

    @Override
    public Locker.Endpoint endpoint(TcpProxy proxy) {
        return new Locker.PostgresEndpoint(databaseUrl, proxy.host(), proxy.port(), table.name());
    }

    @Override
    public String acquireMarker() {
        return ACQUIRE_MARKER;
    }

    /** A row whose owner is set and whose expiry, by the database's clock, is still ahead. */
    @Override
    public LockService.@Nullable Holder holder(String lockId) {
        List<List<Object>> rows = query("SELECT owner, ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint"
                + " FROM " + quoted() + " WHERE lock_id = $1 AND owner IS NOT NULL AND expires_at > clock_timestamp()", lockId);
        return rows.isEmpty() ? null : new Holder((String) rows.get(0).get(0), ((Number) rows.get(0).get(1)).longValue());
    }

    @Override
    public Map<String, LockService.Holder> heldLocks(String prefix) {
        Map<String, LockService.Holder> held = new LinkedHashMap<>();
        for (List<Object> row : query("SELECT lock_id, owner, ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint"
                + " FROM " + quoted() + " WHERE starts_with(lock_id, $1) AND owner IS NOT NULL AND expires_at > clock_timestamp()",
                prefix)) {
            held.put((String) row.get(0), new Holder((String) row.get(1), ((Number) row.get(2)).longValue()));
        }
        return held;
    }

    /**
     * Opens a transaction on a direct connection of its own that locks the lease row of {@code lockId} {@code FOR KEY
     * SHARE}, as r2dbc-fencing's lease check does until the fenced write commits: an acquire of that lock waits for it.
     * Closing the handle commits the transaction, and the row is free again.
     */
    RowHold holdRowForKeyShare(String lockId) {
        Connection connection = Mono.from(admin.create()).block(ADMIN_TIMEOUT);
        try {
            Mono.from(connection.beginTransaction()).block(ADMIN_TIMEOUT);
            Integer pid = Flux.from(connection.createStatement("SELECT pg_backend_pid() FROM " + quoted()
                            + " WHERE lock_id = $1 FOR KEY SHARE").bind(0, lockId).execute())
                    .concatMap(r -> r.map((row, meta) -> row.get(0, Integer.class))).blockLast(ADMIN_TIMEOUT);
            if (pid == null) {
                throw new IllegalStateException("No lease row for " + lockId + " to hold");
            }
            return new RowHold(connection, pid);
        } catch (RuntimeException e) {
            Mono.from(connection.close()).onErrorResume(x -> Mono.empty()).block(ADMIN_TIMEOUT);
            throw e;
        }
    }

    /** How many sessions wait for a lock that the session {@code pid} holds. */
    long sessionsWaitingFor(int pid) {
        return ((Number) query("SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", pid)
                .get(0).get(0)).longValue();
    }

    /** An open transaction that holds a lease row; closing it commits. */
    static final class RowHold implements AutoCloseable {

        private final Connection connection;
        final int pid;

        private RowHold(Connection connection, int pid) {
            this.connection = connection;
            this.pid = pid;
        }

        @Override
        public void close() {
            Mono.from(connection.commitTransaction()).then(Mono.from(connection.close())).block(ADMIN_TIMEOUT);
        }
    }

    /** The row's token: the lock's counter, which a release leaves in place. */
    @Override
    public long counter(String lockId) {
        List<List<Object>> rows = query("SELECT token FROM " + quoted() + " WHERE lock_id = $1", lockId);
        return rows.isEmpty() ? 0 : ((Number) rows.get(0).get(0)).longValue();
    }

    /** Every lease row's token, by lock id. */
    Map<String, Long> tokens() {
        Map<String, Long> tokens = new LinkedHashMap<>();
        for (List<Object> row : query("SELECT lock_id, token FROM " + quoted() + " ORDER BY lock_id")) {
            tokens.put((String) row.get(0), ((Number) row.get(1)).longValue());
        }
        return tokens;
    }

    /** The number of rows of {@code table}, a table of the run. */
    long rows(String table) {
        return ((Number) query("SELECT count(*) FROM " + table).get(0).get(0)).longValue();
    }

    /** The lease database is the ledger's too. */
    @Override
    public String ledgerUrl(String sharedDatabase) {
        return databaseUrl;
    }

    /** The run's rows are in its own lease table, which {@link #close()} drops. */
    @Override
    public void removeRunState(String prefix) {
        // Nothing to do before close.
    }

    /**
     * Restarts the run's own server ({@link RestartablePostgres#restart}, which fails if the postmaster did not change);
     * refuses the shared one.
     */
    void restart(RestartablePostgres.Shutdown shutdown) {
        if (own == null) {
            throw new IllegalStateException("Refusing to restart the shared PostgreSQL: only a server of the run's own is restarted");
        }
        own.restart(shutdown);
    }

    private String quoted() {
        return "\"" + table.name() + "\"";
    }

    private List<List<Object>> query(String sql, Object... args) {
        return Flux.usingWhen(admin.create(), c -> {
                    Statement statement = c.createStatement(sql);
                    for (int i = 0; i < args.length; i++) {
                        statement.bind(i, args[i]);
                    }
                    return Flux.from(statement.execute()).concatMap(result -> result.map((row, meta) -> {
                        List<Object> values = new ArrayList<>();
                        for (int i = 0; i < meta.getColumnMetadatas().size(); i++) {
                            values.add(row.get(i));
                        }
                        return values;
                    }));
                }, Connection::close)
                .collectList()
                .block(ADMIN_TIMEOUT);
    }

    private void execute(String sql) {
        Mono.usingWhen(admin.create(), c -> Flux.from(c.createStatement(sql).execute()).concatMap(r -> r.getRowsUpdated()).then(),
                Connection::close).block(ADMIN_TIMEOUT);
    }

    /** Closes the proxies, drops the lease table, stops the server of the run's own. */
    @Override
    public void close() {
        for (TcpProxy proxy : clientProxies) {
            try {
                proxy.close();
            } catch (RuntimeException e) {
                // Keep closing the rest.
            }
        }
        try {
            if (own == null) {
                execute("DROP TABLE IF EXISTS " + quoted());
            }
        } finally {
            if (own != null) {
                own.close();
            }
        }
    }

    @Override
    public String toString() {
        return (own != null ? own.toString() : "the shared PostgreSQL") + ", lease table " + table.name();
    }
}
