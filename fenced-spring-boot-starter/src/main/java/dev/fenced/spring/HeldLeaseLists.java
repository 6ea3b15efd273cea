package dev.fenced.spring;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.internal.LeasingLockClient;
import java.util.List;
import java.util.function.Supplier;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;

/**
 * Adapts a lock client to the list of held leases that {@link FencedLeasesEndpoint} shows. The public client
 * interface counts held leases but does not list them, so this reads the library's own client implementation
 * (the one {@code FencedLockClient.builder()} and the test kit build); a client of another implementation has
 * nothing to list. When the client interface can list its leases, this becomes a method reference.
 */
final class HeldLeaseLists {

    private static final Log LOG = LogFactory.getLog(HeldLeaseLists.class);

    private HeldLeaseLists() {
    }

    /**
     * The held leases of {@code client}, as a snapshot per call.
     *
     * @param client the lock client
     * @return the supplier of snapshots
     */
    static Supplier<List<FencedLease>> of(FencedLockClient client) {
        if (client instanceof LeasingLockClient library) {
            return library::heldLeaseList;
        }
        LOG.warn("The fenced endpoint lists no leases: the FencedLockClient bean (" + client.getClass().getName()
                + ") was not built by FencedLockClient.builder()");
        return List::of;
    }
}
