package dev.fenced.shedlock;

import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.PostgresLeaseTable;
import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.ConnectionFactories;
import java.time.Duration;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.ExtendWith;

/** ShedLock's provider contract on the PostgreSQL lease store. */
@ExtendWith(PostgresServerExtension.class)
final class FencedLockProviderPostgresIT extends LockProviderContract {

    /** A table of its own, so that its LISTEN connections are this suite's alone. */
    private static final PostgresLeaseTable TABLE = PostgresLeaseTable.named("fenced_lease_shedlock_it");

    private ConnectionPool pool;

    @BeforeEach
    void database(PostgresServer postgres) {
        pool = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(postgres.r2dbcUrl()))
                .maxSize(12).build());
        TABLE.create(pool).block(BOUND);
    }

    @Override
    void afterClientsClosed() {
        pool.disposeLater().block(BOUND);
    }

    @Override
    FencedLockClient newClient(String keyPrefix) {
        return FencedLockClient.builder().postgres(pool, TABLE).keyPrefix(keyPrefix).build();
    }
}
