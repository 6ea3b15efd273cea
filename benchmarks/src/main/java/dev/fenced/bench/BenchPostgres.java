package dev.fenced.bench;

import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Result;
import java.time.Duration;
import java.util.UUID;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The PostgreSQL the storage workloads write to, resolved as the tests resolve it ({@code FENCED_POSTGRES_URL},
 * else a container, else an embedded server), with a pooled connection factory and a table of accounts of its
 * own: a random name, so that parallel builds on one server never share it, created here and dropped on close.
 */
final class BenchPostgres implements AutoCloseable {

    /** Connections in the pool both the plain and the fenced writes use. */
    static final int POOL_SIZE = 32;

    final PostgresServer server;
    final String table;
    final ConnectionFactory connections;
    private final ConnectionPool pool;
    private final String version;

    private BenchPostgres(PostgresServer server, String table, ConnectionPool pool) {
        this.server = server;
        this.table = table;
        this.pool = pool;
        this.connections = pool;
        this.version = Mono.usingWhen(pool.create(),
                c -> Flux.from(c.createStatement("SHOW server_version").execute())
                        .flatMap(r -> r.map((row, meta) -> String.valueOf(row.get(0, String.class))))
                        .next(),
                Connection::close).blockOptional(Duration.ofSeconds(30)).orElse("unknown");
    }

    /**
     * Resolves the server and creates a table of {@code rows} accounts
     * ({@code id, balance, fencing_token, fencing_owner}).
     *
     * @param rows how many rows
     * @return the database, ready
     */
    static BenchPostgres start(int rows) {
        PostgresServer server;
        try {
            server = PostgresServerExtension.server();
        } catch (RuntimeException e) {
            throw BenchmarkException.setUp("PostgreSQL", e);
        }
        ConnectionPool pool = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(server.r2dbcUrl()))
                .initialSize(POOL_SIZE).maxSize(POOL_SIZE).build());
        String table = "bench_accounts_" + UUID.randomUUID().toString().replace("-", "").substring(0, 10);
        BenchPostgres db = new BenchPostgres(server, table, pool);
        try {
            db.execute("CREATE TABLE " + table + " (id bigint PRIMARY KEY, balance bigint NOT NULL, "
                    + "fencing_token bigint, fencing_owner text)",
                    "INSERT INTO " + table + " (id, balance) SELECT g, 0 FROM generate_series(0, " + (rows - 1) + ") g",
                    // Statistics, as autovacuum would gather them a while after the load: without them the planner
                    // guesses the table's size from its pages and joins a multi-row UPDATE's VALUES by a sequential
                    // scan and a hash (1.3 ms for 32 rows of 10,000 against 0.1 ms by the primary key), whichever
                    // statement happens to be planned before autovacuum's ANALYZE.
                    "ANALYZE " + table);
        } catch (RuntimeException e) {
            db.close();
            throw BenchmarkException.setUp("the table " + table, e);
        }
        return db;
    }

    /** Forgets every stored token, so that the next workload's leases start from a clean fence. */
    void clearTokens() {
        execute("UPDATE " + table + " SET fencing_token = NULL, fencing_owner = NULL");
    }

    /** The server's version. */
    String version() {
        return version;
    }

    /** Runs statements in turn on one connection. */
    void execute(String... sql) {
        Mono.usingWhen(pool.create(),
                c -> Flux.fromArray(sql)
                        .concatMap(s -> Flux.from(c.createStatement(s).execute()).flatMap(Result::getRowsUpdated))
                        .then(),
                Connection::close).block(Duration.ofMinutes(2));
    }

    @Override
    public void close() {
        try {
            execute("DROP TABLE IF EXISTS " + table);
        } finally {
            pool.disposeLater().block(Duration.ofSeconds(30));
        }
    }
}
