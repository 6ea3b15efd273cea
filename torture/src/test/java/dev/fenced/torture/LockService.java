package dev.fenced.torture;

import dev.fenced.testservices.TcpProxy;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * Where the locks of one run live, as the harness sees it: Redis ({@link RedisTopology}) or a PostgreSQL lease table
 * ({@link PostgresTopology}). Every client reaches it through a {@link TcpProxy} of its own, made here, so that a fault
 * can hit one client and not the others; what a scenario does to the servers themselves (restart, failover, flush) is
 * on the implementation. Closing it stops what it started and removes what the run left in shared servers.
 */
interface LockService extends AutoCloseable {

    /** A new proxy to the service for one client, closed with this service. */
    TcpProxy clientProxy();

    /** How a client reaches the service through {@code proxy}. */
    Locker.Endpoint endpoint(TcpProxy proxy);

    /**
     * A string that the proxy finds in an acquire request and in no other request of a lock client, to arm
     * {@link TcpProxy#resetAfterRequestContaining(String, int)}: the reply of the acquire is lost after the service ran
     * it.
     */
    String acquireMarker();

    /** The owner of the lock {@code lockId} and the time left of its lease, if it is held now. */
    @Nullable Holder holder(String lockId);

    /**
     * Every lock of the run with key prefix {@code prefix} that is held now, by lock id, with its owner and the time
     * left of its lease by the service's clock. Once every client of the run is closed, each is a lock held by nobody.
     */
    Map<String, Holder> heldLocks(String prefix);

    /** The token counter of the lock {@code lockId} (the last token it issued), or 0 if it never issued one. */
    long counter(String lockId);

    /**
     * The R2DBC URL of the database for the run's account and audit tables. Redis runs keep them in the shared test
     * database ({@code sharedDatabase}); PostgreSQL runs keep them in the lease database, as the README recommends.
     */
    String ledgerUrl(String sharedDatabase);

    /** How the run's workers write the ledger; the transaction of their own by default. */
    default Ledger.Writes writes() {
        return Ledger.Writes.TRANSACTION;
    }

    /**
     * Removes what the run with key prefix {@code prefix} left in a shared server; called after every client of the run
     * is closed and before {@link #close()}.
     */
    void removeRunState(String prefix);

    @Override
    void close();

    /** Who holds a lock, and for how much longer by the service's clock. */
    record Holder(String owner, long remainingMillis) {
    }
}
