package dev.fenced.integration;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.PostgresLeaseTable;
import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.ConnectionFactories;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import java.time.Duration;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.ExtendWith;

/** The Spring Integration lock contract on the PostgreSQL lease store. */
@ExtendWith(PostgresServerExtension.class)
final class FencedLockRegistryPostgresIT extends LockRegistryContract {

    /** A table of its own, so that its LISTEN connections are this suite's alone. */
    private static final PostgresLeaseTable TABLE = PostgresLeaseTable.named("fenced_lease_si_it");

    private ConnectionPool pool;

    @BeforeEach
    void database(PostgresServer postgres) {
        pool = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(postgres.r2dbcUrl()))
                .maxSize(12).build());
        TABLE.create(pool).block(Duration.ofSeconds(BOUND_SECONDS));
    }

    @Override
    void afterClientsClosed() {
        pool.disposeLater().block(Duration.ofSeconds(BOUND_SECONDS));
    }

    @Override
    FencedLockClient newClient(String keyPrefix) {
        return FencedLockClient.builder().postgres(pool, TABLE).keyPrefix(keyPrefix).build();
    }

    @Override
    void freeInStoreOnly(FencedLease lease) {
        Long updated = Mono.usingWhen(pool.create(),
                c -> Flux.from(c.createStatement("UPDATE fenced_lease_si_it SET owner = NULL WHERE lock_id = $1")
                        .bind("$1", lease.lockId()).execute()).flatMap(r -> r.getRowsUpdated()).next(),
                c -> c.close()).block(Duration.ofSeconds(BOUND_SECONDS));
        assertThat(updated).isEqualTo(1L);
    }
}
