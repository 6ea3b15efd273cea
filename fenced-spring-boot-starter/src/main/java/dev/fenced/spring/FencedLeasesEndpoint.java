package dev.fenced.spring;

import dev.fenced.lock.FencedLease;
import java.util.Comparator;
import java.util.List;
import java.util.Objects;
import java.util.function.Supplier;
import org.springframework.boot.actuate.endpoint.OperationResponseBody;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;

/**
 * The Actuator endpoint {@code fenced} ({@code GET /actuator/fenced} once exposed with
 * {@code management.endpoints.web.exposure.include=fenced}): the leases this application's lock client holds
 * now, each with its lock name, fencing token and remaining validity. Read-only: it releases nothing, and it
 * does not show owner ids, which would let a caller release a lease.
 *
 * <p>Thread-safe.
 */
@Endpoint(id = "fenced")
public final class FencedLeasesEndpoint {

    private final Supplier<List<FencedLease>> heldLeases;

    /**
     * An endpoint that lists what {@code heldLeases} returns.
     *
     * @param heldLeases a snapshot of the held leases on every call; must not block
     */
    public FencedLeasesEndpoint(Supplier<List<FencedLease>> heldLeases) {
        this.heldLeases = Objects.requireNonNull(heldLeases, "heldLeases must not be null");
    }

    /**
     * The held leases, by lock name. A lease released or lost since the snapshot was taken is left out.
     *
     * @return the leases
     */
    @ReadOperation
    public HeldLeases leases() {
        return new HeldLeases(heldLeases.get().stream()
                .filter(FencedLease::isHeld)
                .map(lease -> new HeldLease(lease.name(), lease.token(), lease.remainingValidity().toMillis()))
                .sorted(Comparator.comparing(HeldLease::name).thenComparingLong(HeldLease::token))
                .toList());
    }

    /**
     * The endpoint's answer.
     *
     * @param leases the held leases, by lock name
     */
    public record HeldLeases(List<HeldLease> leases) implements OperationResponseBody {
    }

    /**
     * One held lease.
     *
     * @param name the lock name
     * @param token the fencing token
     * @param remainingValidityMillis how long the lease stays valid without another renewal, in milliseconds
     */
    public record HeldLease(String name, long token, long remainingValidityMillis) {
    }
}
