package dev.fenced.lock.internal;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLeaseBatch;
import dev.fenced.lock.ReleaseOutcome;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.function.Function;
import java.util.function.Predicate;
import org.jspecify.annotations.Nullable;
import reactor.core.Disposable;
import reactor.core.Exceptions;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.util.context.ContextView;

/**
 * What every {@code tryAcquireAll} shares, whatever takes the single locks: the checks of the names (before any
 * I/O), and the assembly of a batch that leaves no lease ownerless when it is cancelled or fails. Thread-safe.
 */
public final class LeaseBatches {

    /**
     * The most names one batch may take: a call of this many holds a Redis server for about a millisecond, as the
     * largest call the script batcher sends.
     */
    public static final int MAX_NAMES = 256;

    private LeaseBatches() {
    }

    /**
     * Checks the arguments of a batch: a collection of at most {@link #MAX_NAMES} valid, distinct lock names, and
     * options.
     *
     * @param names the names
     * @param options the options
     * @return the names in order, or the error to signal
     */
    public static Object namesOrProblem(@Nullable Collection<String> names, @Nullable AcquireOptions options) {
        if (names == null) {
            return new NullPointerException("names must not be null");
        }
        if (options == null) {
            return new NullPointerException("options must not be null");
        }
        if (names.size() > MAX_NAMES) {
            return new IllegalArgumentException("A batch takes at most " + MAX_NAMES + " locks, was given " + names.size()
                    + ": split it into batches of at most " + MAX_NAMES);
        }
        List<String> ordered = new ArrayList<>(names.size());
        Set<String> seen = new HashSet<>();
        for (String name : names) {
            String problem = KeyLayout.problemWithName(name);
            if (!problem.isEmpty()) {
                return new IllegalArgumentException(problem);
            }
            if (!seen.add(name)) {
                return new IllegalArgumentException("Lock '" + name + "' appears twice in one batch: a batch takes each "
                        + "lock once");
            }
            ordered.add(name);
        }
        return ordered;
    }

    /**
     * The error of a batch asked inside a scope that already holds one of its names, or {@code null}: a batch never
     * reuses an enclosing scope's lease (its release would end the scope's), and waiting on oneself is never the
     * outcome. A scope's lease that {@code sameLock} says is of another lock (another client's: another key prefix or
     * server) is no reason to refuse, as the single acquire does not reuse it either.
     *
     * @param context the subscriber's Context
     * @param names the names
     * @param sameLock whether a lease of the Context is of the lock this client would take under its name
     * @return the error, or {@code null}
     */
    public static @Nullable IllegalStateException heldByScope(ContextView context, List<String> names,
            Predicate<FencedLease> sameLock) {
        for (String name : names) {
            FencedLease enclosing = LeaseContext.find(context, name);
            if (enclosing != null && sameLock.test(enclosing)) {
                return new IllegalStateException("Lock '" + name + "' is already held by an enclosing scope: a batch "
                        + "does not reuse its lease; leave the name out of the batch");
            }
        }
        return null;
    }

    /**
     * Takes every name with {@code tryOne} (a lease, or empty when busy), all subscribed at once, and makes the batch.
     * If the batch is cancelled or one acquire fails, the leases granted so far are released (those still in flight
     * undo themselves: {@code tryOne} must be cancel-safe) and the batch fails with that failure.
     *
     * @param names the names, checked
     * @param tryOne one cancel-safe single attempt
     * @return the batch
     */
    public static Mono<FencedLeaseBatch> collect(List<String> names, Function<String, Mono<FencedLease>> tryOne) {
        return collect(names, tryOne, leases -> outcomes(leases, FencedLease::release));
    }

    /**
     * As {@link #collect(List, Function)}, with a batch whose {@code releaseAll} runs {@code releaser}.
     *
     * @param names the names, checked
     * @param tryOne one cancel-safe single attempt
     * @param releaser releases a batch's leases ({@link FencedLeaseBatch#of(List, List, Function)})
     * @return the batch
     */
    static Mono<FencedLeaseBatch> collect(List<String> names, Function<String, Mono<FencedLease>> tryOne,
            Function<List<FencedLease>, Mono<Map<String, ReleaseOutcome>>> releaser) {
        if (names.isEmpty()) {
            return Mono.fromSupplier(() -> FencedLeaseBatch.of(List.of(), List.of(), releaser));
        }
        return Mono.defer(() -> {
            Granted granted = new Granted();
            return Flux.fromIterable(names)
                    .flatMapSequential(name -> tryOne.apply(name).doOnNext(granted::add).map(Slot::granted)
                            .defaultIfEmpty(new Slot(name, null)), names.size(), 1)
                    .collectList()
                    .map(slots -> {
                        List<FencedLease> leases = new ArrayList<>(slots.size());
                        List<String> busy = new ArrayList<>();
                        for (Slot slot : slots) {
                            if (slot.lease() != null) {
                                leases.add(slot.lease());
                            } else {
                                busy.add(slot.name());
                            }
                        }
                        return FencedLeaseBatch.of(leases, busy, releaser);
                    })
                    // Cancelled or failed before the batch was made: its leases have no one else to release them.
                    .doOnCancel(granted::abandon)
                    .doOnError(e -> granted.abandon())
                    .doOnDiscard(FencedLeaseBatch.class, LeaseBatches::releaseDiscarded);
        });
    }

    /**
     * Releases the leases with {@code release}, all subscribed at once, as {@link FencedLeaseBatch#releaseAll()}
     * promises: each lease's outcome by lock name, in the leases' order; the first failure once every release has
     * ended, the others suppressed in it. Cold: subscribing subscribes every release; the outcome is signalled on
     * the thread that ends the last release (a Lettuce or R2DBC I/O thread, or the subscriber's when every outcome
     * was known); cancelling stops listening, not the releases.
     *
     * @param leases the leases
     * @param release one lease's release
     * @return the outcomes
     */
    public static Mono<Map<String, ReleaseOutcome>> outcomes(List<FencedLease> leases,
            Function<FencedLease, Mono<ReleaseOutcome>> release) {
        return Flux.fromIterable(leases)
                .flatMapSequentialDelayError(lease -> release.apply(lease).map(outcome -> Map.entry(lease.name(), outcome)),
                        Math.max(1, leases.size()), 1)
                .collectList()
                .map(entries -> {
                    Map<String, ReleaseOutcome> outcomes = new LinkedHashMap<>();
                    entries.forEach(e -> outcomes.put(e.getKey(), e.getValue()));
                    return Collections.unmodifiableMap(outcomes);
                })
                // Several releases failed (a call of them all reset, say): the first, with the others suppressed.
                .onErrorMap(Exceptions::isMultiple, LeaseBatches::firstOf);
    }

    private static Throwable firstOf(Throwable multiple) {
        List<Throwable> all = Exceptions.unwrapMultiple(multiple);
        Throwable first = all.get(0);
        for (Throwable other : all.subList(1, all.size())) {
            if (other != first) {
                first.addSuppressed(other);
            }
        }
        return first;
    }

    /**
     * Releases a batch's leases with one store call ({@link LeaseStore#releaseAll}, through {@link BatchedReleases}):
     * every lease's release is subscribed first (each hands in its owner-checked request, or needs none), then the
     * call leaves. A lease that is not one of this client's held leases is released as its own
     * {@link FencedLease#release()} does.
     *
     * @param store the client's store
     * @param leases the batch's leases
     * @return the outcomes, as {@link #outcomes} makes them
     */
    static Mono<Map<String, ReleaseOutcome>> releaseTogether(LeaseStore store, List<FencedLease> leases) {
        return Mono.create(sink -> {
            BatchedReleases call = new BatchedReleases(store);
            Disposable outcome;
            try {
                outcome = outcomes(leases, lease -> {
                    HeldLease held = HeldLease.of(lease);
                    return held != null ? held.release(call) : lease.release();
                }).subscribe(sink::success, sink::error);
            } finally {
                // Subscribing made every request there is to make (or failed): send them, whatever happened.
                call.send();
            }
            sink.onCancel(outcome);
        });
    }

    /**
     * The leases a batch was granted so far. Once abandoned, every lease it holds or gets later is released: a
     * lease that arrives while the batch is being abandoned is released by whichever side sees it last (a release
     * is idempotent).
     */
    private static final class Granted {

        private final Queue<FencedLease> leases = new ConcurrentLinkedQueue<>();
        private volatile boolean abandoned;

        void add(FencedLease lease) {
            leases.add(lease);
            if (abandoned) {
                abandon();
            }
        }

        void abandon() {
            abandoned = true;
            FencedLease lease;
            while ((lease = leases.poll()) != null) {
                lease.release().subscribe(ok -> { }, e -> { });
            }
        }
    }

    /**
     * Releases a batch that an operator discarded on its way to the subscriber (one that published it on another
     * scheduler, then was cancelled): nobody else can release its leases.
     *
     * @param batch the batch
     */
    public static void releaseDiscarded(FencedLeaseBatch batch) {
        batch.releaseAll().subscribe(ok -> { }, e -> { });
    }

    /** One name's result: its lease, or {@code null} when it was busy. */
    private record Slot(String name, @Nullable FencedLease lease) {

        static Slot granted(FencedLease lease) {
            return new Slot(lease.name(), lease);
        }
    }
}
