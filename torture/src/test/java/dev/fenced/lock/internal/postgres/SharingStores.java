package dev.fenced.lock.internal.postgres;

import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.lock.internal.LeaseStore;
import io.r2dbc.spi.ConnectionFactory;

/**
 * The torture arm's way to the PostgreSQL store's shared statements for one client only: the store's
 * package-private factory with {@code batching} set, whatever the system property says (shared statements are the
 * default, which {@code dev.fenced.postgres.batching=false} turns off for the whole JVM), and the store's own count of
 * the multi-row statements it started. Test code in the store's package; nothing else of the store is reached.
 */
public final class SharingStores {

    private SharingStores() {
    }

    /**
     * A store on {@code table} whose acquires and releases in flight at once share statements, and whose hand-off to a
     * waiter of the same client is one statement, whatever {@code dev.fenced.postgres.batching} says.
     *
     * @param connectionFactory the client's connection factory of r2dbc-postgresql (a pool, or a wrapper of one)
     * @param table the lease table's name
     * @param settings the client's settings
     * @param holderLabel the holder label of its grants
     * @return the store, to hand to {@code LeasingLockClient.create}
     */
    public static LeaseStore open(ConnectionFactory connectionFactory, String table, ClientSettings settings,
            String holderLabel) {
        return PostgresLeaseStore.open(connectionFactory, table, settings, holderLabel, true);
    }

    /**
     * How many multi-row statements the store's batchers started: {@code [acquires, releases]} (counted as each is
     * sent, whatever its outcome).
     *
     * @param store a store of {@link #open}
     * @return the two counts
     */
    public static int[] sharedStatements(LeaseStore store) {
        return ((PostgresLeaseStore) store).sharedStatements();
    }
}
