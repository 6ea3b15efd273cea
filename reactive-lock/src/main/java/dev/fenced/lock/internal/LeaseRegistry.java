package dev.fenced.lock.internal;

import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.jspecify.annotations.Nullable;

/**
 * The leases of a client that are not settled yet: held, or being released. Closing ends each of them, so no
 * lease is left unsignalled when the scheduler that would time it out stops. The renewer keeps its own view
 * of the leases it renews (the held ones). Thread-safe.
 */
final class LeaseRegistry {

    private final Set<HeldLease> unsettled = ConcurrentHashMap.newKeySet();

    void add(HeldLease lease) {
        unsettled.add(lease);
    }

    /** The lease was released or lost. */
    void settled(HeldLease lease) {
        unsettled.remove(lease);
    }

    List<HeldLease> snapshot() {
        return List.copyOf(unsettled);
    }

    /** The held lease on {@code name}, if any. */
    @Nullable HeldLease held(String name) {
        for (HeldLease lease : unsettled) {
            if (lease.name().equals(name) && lease.isActive()) {
                return lease;
            }
        }
        return null;
    }
}
