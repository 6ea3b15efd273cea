package dev.fenced.lock;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * What one {@link FencedLockClient#tryAcquireAll(java.util.Collection, AcquireOptions)} took: a lease for each name
 * that was free, and the names that someone else held. Each lease is a lease like any other: its own token, its own
 * renewal and its own {@link FencedLease#lost()} signal; releasing or losing one does not touch the others.
 *
 * <p>Immutable and thread-safe (the leases it lists are thread-safe).
 */
public final class FencedLeaseBatch {

    private final Map<String, FencedLease> granted;
    private final List<String> busy;
    private final Function<List<FencedLease>, Mono<Map<String, ReleaseOutcome>>> releaser;

    private FencedLeaseBatch(Map<String, FencedLease> granted, List<String> busy,
            Function<List<FencedLease>, Mono<Map<String, ReleaseOutcome>>> releaser) {
        this.granted = granted;
        this.busy = busy;
        this.releaser = releaser;
    }

    /**
     * A batch of the given leases and busy names, for implementations of {@link FencedLockClient}.
     *
     * @param granted the leases, in the order of the names asked for
     * @param busy the names held by someone else, in the order of the names asked for
     * @return the batch
     * @throws IllegalArgumentException if two leases have the same name, or a name is both granted and busy
     */
    public static FencedLeaseBatch of(List<FencedLease> granted, List<String> busy) {
        return of(granted, busy, leases -> dev.fenced.lock.internal.LeaseBatches.outcomes(leases, FencedLease::release));
    }

    /**
     * A batch whose {@link #releaseAll()} runs {@code releaser}, for implementations of {@link FencedLockClient} that
     * can release many leases in one call to their lock service.
     *
     * @param granted the leases, in the order of the names asked for
     * @param busy the names held by someone else, in the order of the names asked for
     * @param releaser releases the given leases (the batch's, in its order) as {@link #releaseAll()} promises: each
     *     lease as its {@link FencedLease#release()} would, cold, one outcome per lease by name in the given order, and
     *     the first failure only once every release has ended
     * @return the batch
     * @throws IllegalArgumentException if two leases have the same name, or a name is both granted and busy
     */
    public static FencedLeaseBatch of(List<FencedLease> granted, List<String> busy,
            Function<List<FencedLease>, Mono<Map<String, ReleaseOutcome>>> releaser) {
        Objects.requireNonNull(releaser, "releaser");
        Map<String, FencedLease> byName = new LinkedHashMap<>();
        for (FencedLease lease : granted) {
            if (byName.put(lease.name(), lease) != null) {
                throw new IllegalArgumentException("two leases of lock '" + lease.name() + "' in one batch");
            }
        }
        for (String name : busy) {
            if (byName.containsKey(name)) {
                throw new IllegalArgumentException("lock '" + name + "' is both granted and busy in one batch");
            }
        }
        return new FencedLeaseBatch(Collections.unmodifiableMap(byName), List.copyOf(busy), releaser);
    }

    /**
     * The leases granted, in the order of the names asked for.
     *
     * @return the leases, possibly none
     */
    public List<FencedLease> leases() {
        return List.copyOf(granted.values());
    }

    /**
     * The lease granted on {@code name}.
     *
     * @param name a lock name
     * @return the lease, or {@code null} when {@code name} was busy or not asked for
     */
    public @Nullable FencedLease lease(String name) {
        return granted.get(name);
    }

    /**
     * The names that someone else held (or that an enclosing scope of the caller holds: a batch reuses no lease),
     * in the order asked for.
     *
     * @return the busy names, possibly none
     */
    public List<String> busy() {
        return busy;
    }

    /**
     * Releases every lease of the batch, each as {@link FencedLease#release()} does (owner- and token-checked, hand-off
     * to a waiter of the same client, idempotent), all at once: on one Redis server (directly or through Sentinel)
     * the batch's releases leave as one call of the release script (a lease handed off to a waiter of the same client
     * takes its own call, as a single release does); on a Redis Cluster each release is a call of its own. Cold; a
     * release that started runs to its end even if the subscriber cancels.
     *
     * @return each lease's outcome by lock name, in the batch's order; fails with the first failure of a release
     *     once every release has ended (the others' outcomes are then those of their leases'
     *     {@link FencedLease#release()}, which may be retried)
     */
    public Mono<Map<String, ReleaseOutcome>> releaseAll() {
        return Mono.defer(() -> releaser.apply(leases()));
    }

    @Override
    public String toString() {
        List<String> tokens = new ArrayList<>(granted.size());
        granted.values().forEach(l -> tokens.add(l.name() + "=" + l.token()));
        return "FencedLeaseBatch{granted=" + tokens + ", busy=" + busy + "}";
    }
}
