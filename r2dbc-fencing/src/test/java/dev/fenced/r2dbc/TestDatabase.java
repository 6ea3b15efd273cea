package dev.fenced.r2dbc;

import dev.fenced.testservices.MariaDbServer;
import dev.fenced.testservices.PostgresServer;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.IsolationLevel;
import io.r2dbc.spi.Result;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A pooled connection factory on a test server (PostgreSQL or MariaDB), and blocking helpers for test set-up and
 * checks. Test SQL is written in the subset both databases understand; {@link #autoIncrementKey()} is the one
 * difference the tests need.
 */
final class TestDatabase implements AutoCloseable {

    final ConnectionFactory connections;
    final boolean mariaDb;
    private final io.r2dbc.pool.ConnectionPool pool;

    private TestDatabase(String r2dbcUrl, boolean mariaDb) {
        ConnectionFactory raw = ConnectionFactories.get(r2dbcUrl);
        this.pool = new io.r2dbc.pool.ConnectionPool(io.r2dbc.pool.ConnectionPoolConfiguration.builder(raw)
                .maxSize(16).build());
        this.connections = pool;
        this.mariaDb = mariaDb;
    }

    static TestDatabase postgres(PostgresServer server) {
        return new TestDatabase(server.r2dbcUrl(), false);
    }

    static TestDatabase mariaDb(MariaDbServer server) {
        return new TestDatabase(server.r2dbcUrl(), true);
    }

    /** The column type of a key that numbers itself. */
    String autoIncrementKey() {
        return mariaDb ? "bigint AUTO_INCREMENT PRIMARY KEY" : "bigserial PRIMARY KEY";
    }

    static String uniqueName(String prefix) {
        return prefix + "_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
    }

    /** Runs statements (DDL, set-up) and returns the rows updated by the last one. */
    long execute(String... sql) {
        return Mono.usingWhen(connections.create(), c -> Flux.fromArray(sql)
                        .concatMap(s -> Flux.from(c.createStatement(s).execute()).flatMap(Result::getRowsUpdated).reduce(0L, Long::sum))
                        .last(0L),
                Connection::close).block(Duration.ofSeconds(30));
    }

    /** The rows of a query, each as a list of its column values. */
    List<List<Object>> query(String sql) {
        return Mono.usingWhen(connections.create(), c -> Flux.from(c.createStatement(sql).execute())
                        .flatMap(result -> result.map((row, meta) -> {
                            List<Object> values = new ArrayList<>();
                            for (int i = 0; i < meta.getColumnMetadatas().size(); i++) {
                                values.add(row.get(i));
                            }
                            return values;
                        }))
                        .collectList(),
                Connection::close).block(Duration.ofSeconds(30));
    }

    /**
     * A connection of the pool in a transaction of the given level that has already read with {@code sql}, fixing its
     * snapshot, as a stale holder's transaction that began with a read.
     */
    Connection readFirstIn(IsolationLevel level, String sql) {
        Connection c = Mono.from(connections.create()).block(Duration.ofSeconds(30));
        Mono.from(c.beginTransaction(level)).block(Duration.ofSeconds(30));
        run(c, sql);
        return c;
    }

    /** Runs one statement on {@code connection}, on the test thread. */
    static void run(Connection connection, String sql) {
        Flux.from(connection.createStatement(sql).execute())
                .flatMap(result -> result.flatMap(segment -> Mono.<Integer>empty()))
                .then().block(Duration.ofSeconds(30));
    }

    /** Rolls the connection's transaction back and returns the connection to the pool. */
    static void rollBackAndClose(Connection connection) {
        Mono.from(connection.rollbackTransaction()).then(Mono.from(connection.close())).block(Duration.ofSeconds(30));
    }

    @Override
    public void close() {
        pool.disposeLater().block(Duration.ofSeconds(10));
    }
}
