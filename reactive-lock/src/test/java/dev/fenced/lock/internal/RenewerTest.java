package dev.fenced.lock.internal;

import dev.fenced.lock.internal.memory.InMemoryLeaseStore;
import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.LossReason;
import dev.fenced.lock.ReleaseOutcome;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.test.scheduler.VirtualTimeScheduler;

/**
 * The renewer's bookkeeping in virtual time over the in-memory store: every held lease has a timer that
 * renews it before its deadline, however and whenever it was tracked, while tracking a lease wakes the
 * renewal worker only when it must. Lease time 3 s and renewal every 1 s unless a test says otherwise.
 */
class RenewerTest {

    private static final Duration LEASE = Duration.ofSeconds(3);
    private static final String LOCK_NAME = "invoice:42";

    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();
    private final InMemoryLeaseStore memory = new InMemoryLeaseStore(clock);
    private final RecordingStore store = new RecordingStore(memory);
    private final LeasingLockClient client = LeasingLockClient.create(store,
            // A command timeout short enough for the 1.5 s leases some tests take (renewed every 0.5 s).
            ClientSettings.of("test:", LEASE, null, Duration.ofSeconds(10), Duration.ofMillis(500), clock));

    @AfterEach
    void tearDown() {
        clock.dispose();
    }

    private void elapse(long millis) {
        clock.advanceTimeBy(Duration.ofMillis(millis));
    }

    private FencedLease acquire(String name) {
        return acquire(name, LEASE);
    }

    private FencedLease acquire(String name, Duration leaseTime) {
        FencedLease lease = client.acquire(name, AcquireOptions.tryOnce().withLeaseTime(leaseTime)).block(Duration.ofSeconds(1));
        assertThat(lease).as(name).isNotNull();
        return lease;
    }

    /** Takes the lock in the store and has {@code renewer} (not the client's) track the lease, as an acquire does. */
    private HeldLease track(Renewer renewer, String name, Duration leaseTime) {
        long leaseNanos = leaseTime.toNanos();
        long renewEvery = leaseNanos / 3;
        String owner = "owner-of-" + name;
        long sentAt = client.now();
        LeaseStore.AcquireReply reply = memory.acquire(name, owner, leaseTime.toMillis(), 0).block(Duration.ofSeconds(1));
        assertThat(reply).isNotNull();
        assertThat(reply.acquired()).isTrue();
        HeldLease lease = new HeldLease(client.runtime(), renewer, new LeaseRegistry(), Handoffs.NONE, name, owner,
                reply.token(), leaseNanos, renewEvery,
                sentAt + leaseNanos - ClientSettings.driftNanos(leaseNanos), sentAt + renewEvery, sentAt);
        renewer.track(lease);
        return lease;
    }

    private static void assertAllHeld(List<? extends FencedLease> leases) {
        for (FencedLease lease : leases) {
            assertThat(lease.isHeld()).as("%s is held", lease).isTrue();
        }
    }

    @Test
    void leasesTakenAtDifferentTimesAreEachRenewedBeforeTheirDeadlines() {
        Random random = new Random(7);
        Duration[] leaseTimes = {Duration.ofMillis(1_500), LEASE, Duration.ofMillis(4_500), Duration.ofSeconds(20)};
        List<FencedLease> held = new ArrayList<>();
        for (int i = 0; i < 300; i++) {
            elapse(random.nextInt(40));
            held.add(acquire("lease-" + i, leaseTimes[random.nextInt(leaseTimes.length)]));
            if (random.nextInt(4) == 0) {
                FencedLease released = held.remove(random.nextInt(held.size()));
                assertThat(released.release().block(Duration.ofSeconds(1))).isEqualTo(ReleaseOutcome.RELEASED);
            }
            assertAllHeld(held);
        }
        for (int step = 0; step < 600; step++) { // 30 s: many lease times of each
            elapse(50);
            assertAllHeld(held);
        }
        for (FencedLease lease : held) {
            assertThat(lease.lost().toFuture()).as("%s never lost", lease).isNotDone();
            assertThat(memory.holder(lease.name())).contains(lease.ownerId() + ":" + lease.token());
        }
        assertThat(client.heldLeases()).isEqualTo(held.size());
    }

    @Test
    void aLeaseDueBeforeTheArmedTimerIsRenewedAtItsOwnTime() {
        FencedLease slow = acquire("slow", Duration.ofSeconds(30)); // timer armed at 10 s
        FencedLease fast = acquire("fast", Duration.ofMillis(1_500)); // due at 0.5 s

        elapse(499);
        assertThat(store.batches).isEmpty();
        elapse(1);
        assertThat(store.batches).containsExactly(List.of("fast"));

        elapse(9_500);
        assertThat(store.renewalsOf("fast")).isEqualTo(20);
        assertThat(store.renewalsOf("slow")).isEqualTo(1);
        assertAllHeld(List.of(slow, fast));
    }

    @Test
    void aLeaseDueAfterTheArmedTimerIsRenewedAtItsOwnTime() {
        FencedLease early = acquire("early"); // timer armed at 1 s
        elapse(300);
        FencedLease late = acquire("late"); // due at 1.3 s, too late to join the renewal at 1 s

        elapse(999);
        assertThat(store.batches).containsExactly(List.of("early"));
        elapse(1);
        assertThat(store.batches).containsExactly(List.of("early"), List.of("late"));
        elapse(10_000);
        assertAllHeld(List.of(early, late));
    }

    @Test
    void trackingALeaseDueAfterTheArmedTimerDoesNotWakeTheWorker() {
        WrappingScheduler scheduler = new WrappingScheduler(clock);
        Renewer renewer = new Renewer(client.runtime(), scheduler);
        List<HeldLease> leases = new ArrayList<>();
        leases.add(track(renewer, "first", LEASE));
        assertThat(scheduler.wakeups).as("no timer was armed").hasValue(1);

        for (int i = 0; i < 100; i++) {
            elapse(5);
            leases.add(track(renewer, "later-" + i, LEASE));
        }
        assertThat(scheduler.wakeups).as("all due after the timer at 1 s").hasValue(1);

        leases.add(track(renewer, "earlier", Duration.ofMillis(1_200))); // at 0.5 s, due at 0.9 s
        assertThat(scheduler.wakeups).hasValue(2);

        elapse(399);
        assertThat(store.batches).isEmpty();
        elapse(1);
        assertThat(store.batches).hasSize(1);
        elapse(10_000);
        assertAllHeld(leases);
        assertThat(renewer.count()).isEqualTo(102);
    }

    @Test
    void aBurstOfTracksWakesTheWorkerOncePerHousekeepingBatch() {
        WrappingScheduler scheduler = new WrappingScheduler(clock);
        Renewer renewer = new Renewer(client.runtime(), scheduler);
        List<HeldLease> leases = new ArrayList<>();
        for (int i = 0; i <= 2 * Renewer.HOUSEKEEPING_BATCH; i++) {
            leases.add(track(renewer, "burst-" + i, LEASE));
        }
        // One wake-up to arm the first timer, then one per batch to drain what was tracked meanwhile.
        assertThat(scheduler.wakeups).hasValue(3);
        elapse(10_000);
        assertAllHeld(leases);
    }

    /**
     * The race of the class javadoc: another thread tracks a lease just as the worker re-arms the timer
     * after a tick, between the drain of new leases and the publication of the new timer. The wrapping
     * scheduler runs that track at exactly this instant. Here the new timer goes to the deadline of a lease
     * whose renewal is in flight, later than the new lease's renewal: the new lease must wake the worker, or
     * it would not be renewed and would silently run out.
     */
    @Test
    void aLeaseTrackedWhileTheTimerIsReArmedIsRenewed() {
        WrappingScheduler scheduler = new WrappingScheduler(clock);
        Renewer renewer = new Renewer(client.runtime(), scheduler);
        HeldLease first = track(renewer, "first", LEASE); // timer at 1 s
        store.neverAnswer("first"); // its renewal stays in flight until its deadline, 2.968 s
        AtomicReference<@Nullable HeldLease> second = new AtomicReference<>();
        scheduler.onArm(() -> second.set(track(renewer, "second", Duration.ofMillis(1_500)))); // due at 1.5 s

        elapse(1_000);
        assertThat(second.get()).as("tracked while the tick at 1 s armed the next timer").isNotNull();
        assertThat(store.renewalsOf("first")).isEqualTo(1);

        elapse(500);
        assertThat(store.renewalsOf("second")).isEqualTo(1);
        elapse(1_400); // past second's first deadline (2.468 s)
        assertThat(second.get().isHeld()).isTrue();
        assertThat(second.get().lost().toFuture()).isNotDone();

        elapse(100); // past first's deadline: its renewal never came back
        assertThat(first.lost().toFuture()).isCompletedWithValueMatching(e -> e.reason() == LossReason.EXPIRED);
        assertThat(second.get().isHeld()).isTrue();
    }

    @Test
    void leasesTrackedAndReleasedFromManyThreadsWhileTicksRunAreAllRenewed() throws Exception {
        int threads = 4;
        int perThread = 400;
        List<FencedLease> kept = new CopyOnWriteArrayList<>();
        AtomicInteger completed = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<?>> work = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int thread = t;
                work.add(pool.submit(() -> {
                    for (int i = 0; i < perThread; i++) {
                        FencedLease lease = acquire("t" + thread + "-" + i,
                                i % 2 == 0 ? LEASE : Duration.ofMillis(1_500 + 10L * thread));
                        if (i % 4 == 0) {
                            kept.add(lease);
                        } else {
                            lease.release().block(Duration.ofSeconds(1));
                        }
                        completed.incrementAndGet();
                    }
                }));
            }
            // Ticks (renewing the leases kept so far) run on this thread while the others track and release. The
            // clock moves 1 ms per completed acquire, so that at most 1.2 s pass between a thread's acquire and
            // its track, however that thread is scheduled: less than the shortest lease.
            int seen = 0;
            while (!work.stream().allMatch(Future::isDone)) {
                int done = completed.get();
                if (done > seen) {
                    elapse(done - seen);
                    seen = done;
                } else {
                    Thread.onSpinWait();
                }
            }
            for (Future<?> f : work) {
                f.get(1, TimeUnit.MINUTES);
            }
        } finally {
            pool.shutdownNow();
        }
        assertThat(kept).hasSize(threads * perThread / 4);
        for (int step = 0; step < 300; step++) { // 15 s
            elapse(50);
            assertAllHeld(kept);
        }
        assertThat(client.heldLeases()).isEqualTo(kept.size());
        Set<String> keptNames = new HashSet<>();
        kept.forEach(lease -> keptNames.add(lease.name()));
        elapse(1_000);
        assertThat(store.lastRound(1_000)).containsAll(keptNames).allMatch(keptNames::contains);
    }

    @Test
    void releasedLeasesAreNoLongerRenewed() {
        FencedLease kept = acquire("kept");
        FencedLease released = acquire("released");
        elapse(2_500);
        assertThat(store.batches).containsExactly(List.of("kept", "released"), List.of("kept", "released"));

        assertThat(released.release().block(Duration.ofSeconds(1))).isEqualTo(ReleaseOutcome.RELEASED);
        elapse(10_000);
        assertThat(store.renewalsOf("released")).isEqualTo(2);
        assertThat(store.renewalsOf("kept")).isEqualTo(12);
        assertThat(client.heldLeases()).isEqualTo(1);
        assertThat(kept.isHeld()).isTrue();
    }

    @Test
    void aLeaseReleasedWhileItsRenewalIsInFlightIsNotRenewedAgain() {
        FencedLease lease = acquire(LOCK_NAME);
        memory.setReplyDelay(Duration.ofMillis(100));
        elapse(1_050); // the renewal sent at 1 s is answered at 1.1 s
        CompletableFuture<ReleaseOutcome> release = lease.release().toFuture();
        elapse(100);
        assertThat(release).isCompletedWithValue(ReleaseOutcome.RELEASED);

        elapse(10_000);
        assertThat(store.renewalsOf(LOCK_NAME)).isEqualTo(1);
        assertThat(memory.holder(LOCK_NAME)).isEmpty();
    }

    @Test
    void manyLeasesTakenCloseTogetherShareOneRenewalPerPeriod() {
        List<FencedLease> leases = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
            leases.add(acquire("batch-" + i));
            elapse(1); // all within a quarter of the renewal period of the first
        }
        elapse(5_000 - 200);
        assertThat(store.batches).hasSize(5).allMatch(batch -> batch.size() == 200);
        assertAllHeld(leases);
    }

    @Test
    void onlyLeasesDueWithinAQuarterPeriodJoinARenewal() {
        acquire("a");
        elapse(200);
        acquire("b"); // due at 1.2 s, within 250 ms of a's renewal at 1 s
        elapse(100);
        acquire("c"); // due at 1.3 s: not within

        elapse(700);
        assertThat(store.batches).containsExactly(List.of("a", "b"));
        elapse(300);
        assertThat(store.batches).containsExactly(List.of("a", "b"), List.of("c"));
        elapse(1_000);
        assertThat(store.batches).containsExactly(List.of("a", "b"), List.of("c"), List.of("a", "b"), List.of("c"));
    }

    @Test
    void heapKeepsTheEarliestLeaseFirstAndFindsAllDueByALimit() {
        heapAgreesWithAModel(0);
    }

    @Test
    void heapOrdersTimesThatWrapAroundLikeNanoTime() {
        heapAgreesWithAModel(Long.MAX_VALUE - 50_000);
    }

    /** Random adds, moves, removals and losses, checked after each step against a plain list. */
    private void heapAgreesWithAModel(long origin) {
        Random random = new Random(11);
        Renewer.LeaseHeap heap = new Renewer.LeaseHeap();
        List<HeldLease> model = new ArrayList<>();
        List<HeldLease> all = new ArrayList<>();
        for (int step = 0; step < 3_000; step++) {
            int op = random.nextInt(10);
            if (op < 4 || model.isEmpty()) {
                HeldLease lease = new HeldLease(client.runtime(), new Renewer(client.runtime()), new LeaseRegistry(),
                        Handoffs.NONE, "h" + step, "o", step, 3_000_000_000L, 1_000_000_000L, 0, 0, 0);
                all.add(lease);
                heap.update(lease, origin + random.nextInt(100_000));
                model.add(lease);
            } else if (op < 7) {
                heap.update(model.get(random.nextInt(model.size())), origin + random.nextInt(100_000));
            } else if (op < 8) {
                heap.remove(model.remove(random.nextInt(model.size())));
            } else if (op < 9) {
                model.get(random.nextInt(model.size())).markLost(LossReason.NOT_HELD); // dropped lazily
            } else if (random.nextInt(20) == 0) {
                heap.retainActive();
                model.removeIf(lease -> !lease.isActive());
            }
            assertThat(heap.size()).isEqualTo(model.size());
            long limit = origin + random.nextInt(100_000);
            List<HeldLease> expected = new ArrayList<>();
            for (HeldLease lease : model) {
                if (lease.dueAt - limit <= 0) {
                    expected.add(lease);
                }
            }
            List<HeldLease> found = heap.dueBy(limit);
            assertThat(found).hasSameSizeAs(expected);
            assertThat(new HashSet<>(found)).isEqualTo(new HashSet<>(expected));
        }
        for (HeldLease lease : all) {
            assertThat(lease.heapSlot >= 0).as("slot of %s", lease).isEqualTo(model.contains(lease));
        }
        List<Long> drained = new ArrayList<>();
        HeldLease first;
        while ((first = heap.firstActive()) != null) {
            drained.add(first.dueAt - origin);
            heap.remove(first);
        }
        List<Long> active = new ArrayList<>();
        model.stream().filter(HeldLease::isActive).forEach(lease -> active.add(lease.dueAt - origin));
        Collections.sort(active);
        assertThat(drained).isEqualTo(active);
    }

    /**
     * Delegates to a scheduler, counts the worker's immediate tasks (each one wakes the renewal thread) and
     * can run an action each time a delayed task (the renewer's timer) has just been scheduled.
     */
    private static final class WrappingScheduler implements Scheduler {

        final AtomicInteger wakeups = new AtomicInteger();
        private final Scheduler delegate;
        private volatile Runnable onArm = () -> { };

        WrappingScheduler(Scheduler delegate) {
            this.delegate = delegate;
        }

        /** Runs {@code action} once, the next time a timer is armed. */
        void onArm(Runnable action) {
            onArm = () -> {
                onArm = () -> { };
                action.run();
            };
        }

        @Override
        public Disposable schedule(Runnable task) {
            return delegate.schedule(task);
        }

        @Override
        public long now(TimeUnit unit) {
            return delegate.now(unit);
        }

        @Override
        public Worker createWorker() {
            Worker worker = delegate.createWorker();
            return new Worker() {
                @Override
                public Disposable schedule(Runnable task) {
                    wakeups.incrementAndGet();
                    return worker.schedule(task);
                }

                @Override
                public Disposable schedule(Runnable task, long delay, TimeUnit unit) {
                    Disposable timer = worker.schedule(task, delay, unit);
                    onArm.run();
                    return timer;
                }

                @Override
                public void dispose() {
                    worker.dispose();
                }

                @Override
                public boolean isDisposed() {
                    return worker.isDisposed();
                }
            };
        }
    }

    /**
     * Counts what is asked of a store, records the names (sorted) of each renewal round, and can leave some
     * renewals unanswered.
     */
    private final class RecordingStore extends CountingLeaseStore {

        final List<List<String>> batches = new CopyOnWriteArrayList<>();
        private final List<Long> batchTimes = new CopyOnWriteArrayList<>();
        private final Set<String> unanswered = Collections.synchronizedSet(new HashSet<>());

        RecordingStore(LeaseStore delegate) {
            super(delegate);
        }

        void neverAnswer(String name) {
            unanswered.add(name);
        }

        long renewalsOf(String name) {
            return batches.stream().flatMap(List::stream).filter(name::equals).count();
        }

        /** The names renewed in the last {@code millis} of virtual time. */
        List<String> lastRound(long millis) {
            long since = clock.now(TimeUnit.MILLISECONDS) - millis;
            List<String> names = new ArrayList<>();
            for (int i = 0; i < batches.size(); i++) {
                if (batchTimes.get(i) > since) {
                    names.addAll(batches.get(i));
                }
            }
            return names;
        }

        @Override
        public Mono<List<Boolean>> renew(List<RenewRequest> leases) {
            Mono<List<Boolean>> renewal = super.renew(leases);
            return Mono.defer(() -> {
                List<String> names = leases.stream().map(RenewRequest::name).sorted().toList();
                synchronized (this) {
                    batchTimes.add(clock.now(TimeUnit.MILLISECONDS));
                    batches.add(names);
                }
                return names.stream().anyMatch(unanswered::contains) ? Mono.never() : renewal;
            });
        }
    }
}
