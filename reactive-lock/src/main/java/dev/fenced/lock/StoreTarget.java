package dev.fenced.lock;

import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.lock.internal.LeaseStore;
import dev.fenced.lock.internal.postgres.PostgresLeaseStore;
import dev.fenced.lock.internal.redis.RedisLeaseStore;
import dev.fenced.lock.internal.redis.RedisTarget;
import dev.fenced.lock.internal.redis.ReplicaAcks;
import io.r2dbc.spi.ConnectionFactory;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * Where a client keeps its leases: the one description of the target that {@link FencedLockClientBuilder}
 * holds. A Redis deployment (itself one {@link RedisTarget}) or a PostgreSQL database. Only the PostgreSQL
 * case and the builder's {@code postgres(...)} methods name an R2DBC type, and the JVM resolves those only when
 * they run, so a Redis client never loads one (R2DBC is an optional dependency).
 */
sealed interface StoreTarget {

    /**
     * Opens the store.
     *
     * @param settings the client settings
     * @param acks the replica acknowledgement required of an acquire (Redis only, checked by the builder)
     * @return the store
     */
    LeaseStore open(ClientSettings settings, ReplicaAcks acks);

    /**
     * Opens the store, whose grants record a holder label for the fleet view.
     *
     * @param settings the client settings
     * @param acks the replica acknowledgement required of an acquire (Redis only, checked by the builder)
     * @param holderLabel the label, already validated, or {@code null} for none
     * @return the store
     */
    LeaseStore open(ClientSettings settings, ReplicaAcks acks, @Nullable String holderLabel);

    /**
     * Locks on Redis or Valkey.
     *
     * @param target the deployment
     */
    record Redis(RedisTarget target) implements StoreTarget {

        /** Validates. */
        public Redis {
            Objects.requireNonNull(target, "target");
        }

        @Override
        public LeaseStore open(ClientSettings settings, ReplicaAcks acks) {
            return RedisLeaseStore.open(target, settings, acks);
        }

        @Override
        public LeaseStore open(ClientSettings settings, ReplicaAcks acks, @Nullable String holderLabel) {
            return RedisLeaseStore.open(target, settings, acks, holderLabel);
        }
    }

    /**
     * Locks on PostgreSQL.
     *
     * @param connectionFactory the application's connection factory of r2dbc-postgresql
     * @param table the lease table
     */
    record Postgres(ConnectionFactory connectionFactory, PostgresLeaseTable table) implements StoreTarget {

        /** Validates. */
        public Postgres {
            Objects.requireNonNull(connectionFactory, "connectionFactory");
            Objects.requireNonNull(table, "table");
        }

        @Override
        public LeaseStore open(ClientSettings settings, ReplicaAcks acks) {
            return PostgresLeaseStore.open(connectionFactory, table.name(), settings);
        }

        @Override
        public LeaseStore open(ClientSettings settings, ReplicaAcks acks, @Nullable String holderLabel) {
            return PostgresLeaseStore.open(connectionFactory, table.name(), settings, holderLabel);
        }
    }
}
