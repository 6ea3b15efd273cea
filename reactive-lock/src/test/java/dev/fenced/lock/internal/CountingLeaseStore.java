package dev.fenced.lock.internal;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** Delegates to a store and counts what is asked of it. Tests that record more extend it. */
class CountingLeaseStore implements LeaseStore {

    final AtomicInteger acquires = new AtomicInteger();
    final AtomicInteger releases = new AtomicInteger();
    /** Calls of {@link #acquireAll}, each counted once (the default's single acquires are counted too). */
    final AtomicInteger acquireAlls = new AtomicInteger();
    /** The size of each call of {@link #releaseAll}, in order (the default's single releases are counted too). */
    final List<Integer> releaseAlls = new CopyOnWriteArrayList<>();
    /** Hand-offs: each is a release and an acquire in one call. */
    final AtomicInteger handoffs = new AtomicInteger();
    final List<Integer> renewBatches = new CopyOnWriteArrayList<>();
    /** The lease time of every acquire, in ms, in order. */
    final List<Long> acquireMillis = new CopyOnWriteArrayList<>();
    /** Every renewal request, in order. */
    final List<RenewRequest> renewRequests = new CopyOnWriteArrayList<>();
    private final LeaseStore delegate;

    CountingLeaseStore(LeaseStore delegate) {
        this.delegate = delegate;
    }

    int calls() {
        return acquires.get() + releases.get() + handoffs.get() + renewBatches.size();
    }

    @Override
    public Mono<AcquireReply> acquire(String name, String owner, long leaseMillis, long floor) {
        return Mono.defer(() -> {
            acquires.incrementAndGet();
            acquireMillis.add(leaseMillis);
            return delegate.acquire(name, owner, leaseMillis, floor);
        });
    }

    @Override
    public Mono<List<AcquireResult>> acquireAll(List<AcquireRequest> requests) {
        return Mono.defer(() -> {
            acquireAlls.incrementAndGet();
            return LeaseStore.super.acquireAll(requests);
        });
    }

    @Override
    public Mono<List<Boolean>> renew(List<RenewRequest> leases) {
        return Mono.defer(() -> {
            renewBatches.add(leases.size());
            renewRequests.addAll(leases);
            return delegate.renew(leases);
        });
    }

    @Override
    public Mono<Boolean> release(String name, String owner, @Nullable Long token) {
        return Mono.defer(() -> {
            releases.incrementAndGet();
            return delegate.release(name, owner, token);
        });
    }

    @Override
    public Mono<List<ReleaseResult>> releaseAll(List<ReleaseRequest> requests) {
        return Mono.defer(() -> {
            releaseAlls.add(requests.size());
            return LeaseStore.super.releaseAll(requests);
        });
    }

    @Override
    public Mono<Handoff> handOff(String name, String owner, long token, String nextOwner, long leaseMillis, long floor) {
        return Mono.defer(() -> {
            handoffs.incrementAndGet();
            return delegate.handOff(name, owner, token, nextOwner, leaseMillis, floor);
        });
    }

    @Override
    public Flux<Long> releases(String name) {
        return delegate.releases(name);
    }

    @Override
    public Flux<LockState> locks(NamePattern pattern) {
        return delegate.locks(pattern);
    }

    @Override
    public Mono<LockState> lock(String name) {
        return delegate.lock(name);
    }

    @Override
    public Mono<Broken> breakLock(String name, long expectedToken) {
        return delegate.breakLock(name, expectedToken);
    }

    @Override
    public Mono<Void> ping() {
        return delegate.ping();
    }

    @Override
    public Flux<String> serverChanges() {
        return delegate.serverChanges();
    }

    @Override
    public boolean neverSent(Throwable error) {
        return delegate.neverSent(error);
    }

    @Override
    public Mono<Void> close() {
        return delegate.close();
    }
}
