package dev.fenced.lock;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.ConnectionFactories;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** {@code tryAcquireAll} on the PostgreSQL lease store: a single attempt per name, through the public API. */
@ExtendWith(PostgresServerExtension.class)
class PostgresTryAcquireAllIT {

    private static final Duration BOUND = Duration.ofSeconds(20);
    private static final PostgresLeaseTable TABLE = PostgresLeaseTable.named("fenced_lease_batch_it");

    private ConnectionPool pool;
    private FencedLockClient client;
    private FencedLockClient other;

    @BeforeEach
    void setUp(PostgresServer postgres) {
        pool = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(postgres.r2dbcUrl()))
                .maxSize(8).build());
        TABLE.create(pool).block(BOUND);
        String prefix = "it-" + UUID.randomUUID() + ":";
        client = FencedLockClient.builder().postgres(pool, TABLE).keyPrefix(prefix).build();
        other = FencedLockClient.builder().postgres(pool, TABLE).keyPrefix(prefix).build();
    }

    @AfterEach
    void tearDown() {
        client.close();
        other.close();
        pool.disposeLater().block(BOUND);
    }

    @Test
    void freeNamesAreGrantedBusyOnesReportedAndAllReleasedAtOnce() {
        FencedLease held = other.tryAcquire("pg:2").block(BOUND);
        FencedLeaseBatch batch = client.tryAcquireAll(List.of("pg:1", "pg:2", "pg:3")).block(BOUND);
        assertThat(batch.busy()).containsExactly("pg:2");
        assertThat(batch.leases()).extracting(FencedLease::name).containsExactly("pg:1", "pg:3");
        assertThat(client.lock("pg:1").block(BOUND).token()).isEqualTo(batch.lease("pg:1").token());
        assertThat(batch.releaseAll().block(BOUND)).isEqualTo(Map.of("pg:1", ReleaseOutcome.RELEASED,
                "pg:3", ReleaseOutcome.RELEASED));
        assertThat(client.lock("pg:1").blockOptional(BOUND)).isEmpty();
        assertThat(client.lock("pg:2").block(BOUND).token()).isEqualTo(held.token());
        FencedLeaseBatch next = other.tryAcquireAll(List.of("pg:1", "pg:3")).block(BOUND);
        assertThat(next.lease("pg:1").token()).isGreaterThan(batch.lease("pg:1").token());
        next.releaseAll().block(BOUND);
    }
}
