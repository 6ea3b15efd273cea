package dev.fenced.lock.internal;

import dev.fenced.lock.LossReason;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * Renews every held lease of a client from one timer on one scheduler worker, with no thread per lease.
 *
 * <p>The timer fires at the earliest due time among the held leases: a lease is due at its renewal time, or
 * at its deadline while a renewal is in flight or the lease is frozen. A tick renews, in one store call,
 * every lease that is due, together with those that would be due within the next quarter of their renewal
 * period, so that leases taken around the same time share round trips. A "not held" reply loses the lease
 * at once; a failed call is retried until the lease's local deadline, where the lease is lost.
 *
 * <p><b>Bookkeeping.</b> The worker keeps the leases in a min-heap ordered by due time, each lease knowing
 * its slot, so that changing or removing one lease costs O(log n), and a tick O(k log n) for the k leases
 * it looks at: those due within the widest batching window among the held leases (with mixed lease times,
 * some of them are left for later). {@link #track} does not touch the heap: from any thread, it adds the lease to a lock-free
 * inbox that the worker drains into the heap, and it wakes the worker only when the new lease is due
 * before the armed timer (or no timer is armed). {@link #forget} only drops the lease from the set of held
 * leases; the heap loses released leases lazily (when they reach its top or are looked at by a tick, or by
 * a compaction once they outnumber the live ones). Every {@value #HOUSEKEEPING_BATCH} tracks and forgets the
 * worker is woken once to drain the inbox, so that neither it nor the heap holds many released leases.
 *
 * <p><b>Invariant: every held lease has a timer armed no later than its due time</b> (whose tick renews it
 * or declares it lost), or a worker task that will drain it into the heap is queued. A lease's key in the
 * heap is never later than its due time. The worker publishes in {@link #armedAt} either {@link #UNARMED}
 * or a time no earlier than that of the armed timer; only the worker writes it. Every worker step that
 * drains the inbox, and only such a step re-arms or cancels the timer: (1) sets {@code armedAt} to
 * {@code UNARMED}, (2) drains the inbox into the heap, (3) arms the timer at the heap's minimum, keeping an
 * earlier one, (4) publishes the timer's time. {@code track} offers the lease to the inbox <em>before</em>
 * it reads {@code armedAt}, and queues such a step if it reads {@code UNARMED} or a time after the lease's
 * due time. A lease that queued nothing read a published time T no later than its due time; the timer at
 * or before T stays armed until the worker's next step (1), which comes after that read in the order of
 * volatile accesses, so the drain (2) that follows sees the lease and (3) arms the timer no later than its
 * due time. A tick is such a step, so a lease tracked while the timer fires is either drained by that tick
 * or queues another step.
 *
 * <p>All other state (the heap, the timer, the leases' renewal fields) is confined to the worker, which
 * serializes it. Thread-safe: {@link #track}, {@link #forget}, {@link #held}, {@link #count} and {@link #stop}
 * may be called from any thread.
 */
final class Renewer {

    private static final Logger log = Loggers.getLogger(Renewer.class);

    /** {@link #armedAt} when no timer may be relied on: every {@link #track} wakes the worker. */
    private static final long UNARMED = Long.MIN_VALUE;

    /** Tracks and forgets between two drains of the inbox, at most (give or take a few in flight). */
    static final int HOUSEKEEPING_BATCH = 1024;

    private final LeaseRuntime runtime;
    private final Scheduler scheduler;
    private final Scheduler.Worker worker;
    private volatile boolean stopped;
    private final Set<HeldLease> leases = ConcurrentHashMap.newKeySet();
    private final Queue<HeldLease> inbox = new ConcurrentLinkedQueue<>();
    private final AtomicInteger changesSinceDrain = new AtomicInteger();
    private volatile long armedAt = UNARMED;
    // How each caller waiting on the worker (settled, moveCap) is ended if the worker stops first: a task the
    // disposed worker drops, or a reply it can no longer take, must not leave the caller's Mono hanging.
    private final Set<Runnable> endOnStop = ConcurrentHashMap.newKeySet();

    // Confined to the worker.
    private final LeaseHeap heap = new LeaseHeap();
    private @Nullable Disposable timer;
    private long timerAt;
    private long widestWindowNanos;

    Renewer(LeaseRuntime runtime) {
        this(runtime, runtime.scheduler());
    }

    /** A renewer on a scheduler of its own (tests wrap the client's scheduler to watch the worker). */
    Renewer(LeaseRuntime runtime, Scheduler scheduler) {
        this.runtime = runtime;
        this.scheduler = scheduler;
        this.worker = scheduler.createWorker();
    }

    /** Renews the lease from now on; from any thread, without waking the worker unless it must. */
    void track(HeldLease lease) {
        leases.add(lease);
        if (scheduler.isDisposed()) {
            // Its armed timer is gone too: nothing will renew any lease.
            schedulerRejected(new RejectedExecutionException("the renewal scheduler is disposed"));
            return;
        }
        inbox.offer(lease); // before reading armedAt: see the class javadoc
        long armed = armedAt;
        if (armed == UNARMED || lease.renewAt - armed < 0 || lease.deadline() - armed < 0) {
            run(this::rearm);
        } else {
            changed();
        }
    }

    /**
     * Whether the scheduler is disposed while the client is open; if so, every held lease is lost now
     * ({@link LossReason#SCHEDULER_REJECTED}), since none can be renewed.
     */
    boolean schedulerDisposed() {
        if (!scheduler.isDisposed() || stopped) {
            return false;
        }
        schedulerRejected(new RejectedExecutionException("the renewal scheduler is disposed"));
        return true;
    }

    /** Stops renewing the lease; from any thread. The heap drops it lazily. */
    void forget(HeldLease lease) {
        if (leases.remove(lease)) {
            changed();
        }
    }

    List<HeldLease> held() {
        return new ArrayList<>(leases);
    }

    int count() {
        return leases.size();
    }

    /**
     * Stops renewing. Every caller still waiting on the worker is ended now, on this thread: a tail waiting for a
     * renewal in flight goes on as if it had settled (nothing renews any more), a cap being moved emits false.
     */
    void stop() {
        stopped = true; // before reading endOnStop: see settled
        worker.dispose();
        for (Runnable end : List.copyOf(endOnStop)) {
            endOnStop.remove(end);
            end.run();
        }
    }

    /**
     * Registers how to end a caller waiting on the worker if the worker stops first; false if it has stopped (the
     * caller ends now). Registered before {@link #stopped} is read, so that a concurrent {@link #stop} sees it.
     */
    private boolean endOnStop(MonoSink<?> sink, Runnable end) {
        endOnStop.add(end);
        sink.onDispose(() -> endOnStop.remove(end));
        return !stopped;
    }

    /**
     * The scheduler refused work while the client is open (an injected scheduler disposed under it): nothing
     * can renew the leases any more, so each is lost now, loudly, rather than silently at its deadline.
     */
    private void schedulerRejected(RejectedExecutionException e) {
        if (stopped) {
            log.debug("Renewer stopped; dropped a task");
            return;
        }
        log.warn("The renewal scheduler rejected work ({}): every held lease is lost, since none can be renewed. An "
                + "injected scheduler must outlive the client (StepVerifier.withVirtualTime disposes its scheduler when "
                + "the verification ends)", e.toString());
        for (HeldLease lease : leases) {
            lease.markLost(LossReason.SCHEDULER_REJECTED, e);
        }
    }

    private void changed() {
        if (changesSinceDrain.incrementAndGet() == HOUSEKEEPING_BATCH) {
            run(this::rearm);
        }
    }

    private void run(Runnable task) {
        try {
            worker.schedule(task);
        } catch (RejectedExecutionException e) {
            schedulerRejected(e);
        }
    }

    private void tick() {
        timer = null;
        armedAt = UNARMED;
        drain();
        long now = runtime.now();
        List<HeldLease> candidates = heap.dueBy(now + widestWindowNanos);
        List<HeldLease> due = new ArrayList<>();
        for (HeldLease lease : candidates) {
            if (!lease.isActive()) {
                heap.remove(lease);
            } else if (lease.capped && (now - lease.capAt >= 0 || (lease.capLimited && now - lease.deadline() >= 0))) {
                // The hold cap: reached, or the last renewal asked only for what was left of it and that has run out.
                lease.reachMaxHold();
                heap.remove(lease);
            } else if (now - lease.deadline() >= 0) {
                lease.markLost(LossReason.EXPIRED);
                heap.remove(lease);
            } else if (lease.renewing || lease.isFrozen() || lease.capLimited) {
                heap.update(lease, dueAt(lease)); // a lease frozen since it was queued is now due at its deadline
            } else if (lease.bounded && now - lease.holdUntil >= 0) {
                // Held past the client's maximum hold: probably dropped by its subscriber. Stop renewing; it expires.
                log.warn("Lease on lock '{}' (token {}) was held for the maximum hold and is not renewed any more; it "
                        + "expires at its deadline. Was it released?", lease.name(), lease.token());
                lease.freeze();
                heap.update(lease, dueAt(lease));
            } else {
                long window = lease.retrying ? 0 : lease.renewEveryNanos() / 4;
                if (now - (lease.renewAt - window) >= 0) {
                    if (lease.capped && renewalMillis(lease, now) < 1) {
                        lease.capLimited = true; // less than a millisecond of the cap is left: it ends at the cap
                        heap.update(lease, dueAt(lease));
                    } else {
                        due.add(lease);
                    }
                }
            }
        }
        if (!due.isEmpty()) {
            send(due, now);
        }
        rearm();
    }

    private void send(List<HeldLease> due, long sentAt) {
        List<LeaseStore.RenewRequest> requests = new ArrayList<>(due.size());
        for (HeldLease lease : due) {
            lease.renewing = true;
            heap.update(lease, dueAt(lease));
            requests.add(new LeaseStore.RenewRequest(lease.name(), lease.ownerId(), lease.token(), renewalMillis(lease, sentAt)));
        }
        // Counted in flight, so that closing waits for it (and for the tails that wait for it) before stopping.
        runtime.inFlight().track(runtime.store().renew(requests)).subscribe(
                held -> run(() -> renewed(due, requests, held, sentAt)),
                error -> run(() -> failed(due, error)));
    }

    /**
     * What a renewal sent now asks for: the lease time, or only what is left of the hold cap (rounded down, so the
     * lock's expiry in the service never lies beyond the cap as this clock counts it).
     */
    private static long renewalMillis(HeldLease lease, long now) {
        long millis = lease.leaseMillis();
        if (lease.capped) {
            millis = Math.min(millis, TimeUnit.NANOSECONDS.toMillis(lease.capAt - now));
        }
        return millis;
    }

    /**
     * Sets the deadline after the lock service extended the lease by {@code millis} from a request sent at
     * {@code sentAt}: never beyond the hold cap. A renewal for the rest of the cap is the lease's last.
     */
    private static void extended(HeldLease lease, long sentAt, long millis) {
        boolean full = millis >= lease.leaseMillis();
        long granted = full ? lease.leaseNanos() : TimeUnit.MILLISECONDS.toNanos(millis);
        long deadline = sentAt + granted - ClientSettings.driftNanos(granted);
        if (lease.capped) {
            lease.capLimited = !full;
            if (deadline - lease.capAt > 0) {
                deadline = lease.capAt;
            }
        }
        lease.extendTo(deadline);
        lease.renewAt = sentAt + lease.renewEveryNanos();
    }

    /**
     * Moves the hold cap of a lease to {@code capNanos} from now ({@link HeldLease#resetMaxHold}): once no renewal of
     * the lease is in flight, renews it at once for no more than the new cap, then puts the cap and the deadline in
     * force, all on the worker, so that no renewal of the old cap can land after it. Emits whether the service still
     * held the lease; a "not held" reply loses it. A failure leaves the old cap in force.
     */
    Mono<Boolean> moveCap(HeldLease lease, long capNanos) {
        return Mono.<Boolean>create(sink -> {
            boolean queued = endOnStop(sink, () -> sink.success(false)) && onWorker(() -> whenSettled(lease, () -> {
                if (!lease.isActive()) {
                    sink.success(false);
                    return;
                }
                lease.renewing = true; // the renewer leaves it alone until this renewal has ended
                if (lease.heapSlot >= 0) {
                    heap.update(lease, dueAt(lease));
                }
                long sentAt = runtime.now();
                long millis = Math.min(lease.leaseMillis(), TimeUnit.NANOSECONDS.toMillis(capNanos));
                LeaseStore.RenewRequest request = new LeaseStore.RenewRequest(lease.name(), lease.ownerId(), lease.token(), millis);
                runtime.inFlight().track(runtime.store().renew(List.of(request))).subscribe(
                        held -> run(() -> {
                            lease.renewing = false;
                            sink.success(capMoved(lease, sentAt, capNanos, millis, !held.isEmpty() && held.get(0)));
                            runSettled(lease);
                        }),
                        error -> run(() -> {
                            lease.renewing = false;
                            if (lease.heapSlot >= 0) {
                                heap.update(lease, dueAt(lease));
                            }
                            rearm();
                            sink.error(error);
                            runSettled(lease);
                        }));
            }));
            if (!queued) {
                sink.success(false);
            }
        });
    }

    /**
     * Completes once no renewal of the lease is in flight (at once if none is), on the worker: a release that sets the
     * lease's last expiry ({@link HeldLease#releaseNoSoonerThan}) waits for it, so that no renewal sent before can
     * land after it and extend the lock again (on PostgreSQL each command may take its own connection). Completes at
     * once, on the stopping thread, if the renewer stops first ({@link #stop}): it always completes.
     */
    Mono<Void> settled(HeldLease lease) {
        return Mono.create(sink -> {
            if (!endOnStop(sink, sink::success) || !onWorker(() -> whenSettled(lease, sink::success))) {
                sink.success(); // the worker is gone: nothing renews any more
            }
        });
    }

    /** Runs the task on the worker now if no renewal of the lease is in flight, else once the renewal has ended. */
    private static void whenSettled(HeldLease lease, Runnable task) {
        if (!lease.renewing) {
            task.run();
            return;
        }
        List<Runnable> waiting = lease.whenSettled;
        if (waiting == null) {
            waiting = new ArrayList<>(1);
            lease.whenSettled = waiting;
        }
        waiting.add(task);
    }

    /** The lease's renewal has ended: run what waited for it (which may start another). */
    private static void runSettled(HeldLease lease) {
        List<Runnable> waiting = lease.whenSettled;
        if (waiting != null && !lease.renewing) {
            lease.whenSettled = null;
            waiting.forEach(Runnable::run);
        }
    }

    /** Schedules a task on the worker; false if the scheduler refuses it. */
    private boolean onWorker(Runnable task) {
        try {
            worker.schedule(task);
            return true;
        } catch (RejectedExecutionException e) {
            return false;
        }
    }

    private boolean capMoved(HeldLease lease, long sentAt, long capNanos, long millis, boolean held) {
        if (!lease.isActive()) {
            heap.remove(lease);
            if (held && lease.loss() != null) {
                // Lost meanwhile, yet the service extended it: free it.
                runtime.inFlight().track(runtime.store().release(lease.name(), lease.ownerId(), lease.token()))
                        .subscribe(null, e -> { });
            }
            rearm();
            return false;
        }
        if (!held) {
            lease.markLost(LossReason.NOT_HELD);
            heap.remove(lease);
            rearm();
            return false;
        }
        lease.capped = true;
        lease.capAt = sentAt + capNanos;
        extended(lease, sentAt, millis);
        if (lease.heapSlot >= 0) {
            heap.update(lease, dueAt(lease));
        }
        rearm();
        return true;
    }

    private void renewed(List<HeldLease> due, List<LeaseStore.RenewRequest> requests, List<Boolean> held, long sentAt) {
        int extended = 0;
        for (int i = 0; i < due.size(); i++) {
            HeldLease lease = due.get(i);
            lease.renewing = false;
            boolean stillHeld = i < held.size() && held.get(i);
            if (!lease.isActive()) {
                heap.remove(lease);
                if (stillHeld && lease.loss() != null) {
                    // Lost by our clock while the renewal was in flight, yet Redis extended it: free it.
                    runtime.inFlight().track(runtime.store().release(lease.name(), lease.ownerId(), lease.token())).subscribe(null, e -> { });
                }
                continue;
            }
            if (stillHeld) {
                extended++;
                lease.retrying = false;
                extended(lease, sentAt, requests.get(i).leaseMillis());
                heap.update(lease, dueAt(lease));
            } else {
                lease.markLost(LossReason.NOT_HELD);
                heap.remove(lease);
            }
        }
        if (extended > 0) {
            runtime.observer().leasesRenewed(extended);
        }
        for (HeldLease lease : due) {
            runSettled(lease);
        }
        rearm();
    }

    private void failed(List<HeldLease> due, Throwable error) {
        runtime.observer().renewalFailed(due.size());
        long now = runtime.now();
        int firstFailures = 0;
        for (HeldLease lease : due) {
            if (!lease.retrying) {
                firstFailures++;
            }
            lease.renewing = false;
            if (!lease.isActive()) {
                heap.remove(lease);
                continue;
            }
            if (now - lease.deadline() >= 0) {
                lease.markLost(LossReason.EXPIRED);
                heap.remove(lease);
            } else {
                lease.retrying = true;
                lease.renewAt = now + Math.max(TimeUnit.MILLISECONDS.toNanos(1), lease.renewEveryNanos() / 3);
                heap.update(lease, dueAt(lease));
            }
        }
        // Warn when leases start failing, not on every retry of the same outage.
        if (firstFailures > 0) {
            log.warn("Renewal of {} lease(s) failed; retrying until their deadlines: {}", firstFailures, error.toString());
        } else {
            log.debug("Renewal retry of {} lease(s) failed: {}", due.size(), error.toString());
        }
        for (HeldLease lease : due) {
            runSettled(lease);
        }
        rearm();
    }

    /** The guarded step of the class javadoc: drain the inbox, then arm the timer at the earliest due time. */
    private void rearm() {
        armedAt = UNARMED;
        drain();
        HeldLease first = heap.firstActive();
        if (first == null) {
            if (timer != null) {
                timer.dispose();
                timer = null;
            }
            return; // stays UNARMED: the next track wakes the worker
        }
        long next = first.dueAt;
        Disposable current = timer;
        if (current == null || timerAt - next > 0) {
            if (current != null) {
                current.dispose();
            }
            try {
                timer = worker.schedule(this::tick, Math.max(0, next - runtime.now()), TimeUnit.NANOSECONDS);
            } catch (RejectedExecutionException e) {
                timer = null;
                schedulerRejected(e);
                return;
            }
            timerAt = next;
        }
        // A published time later than the timer's is safe (more tracks wake the worker); UNARMED is reserved.
        armedAt = timerAt == UNARMED ? UNARMED + 1 : timerAt;
    }

    private void drain() {
        changesSinceDrain.set(0);
        HeldLease lease;
        while ((lease = inbox.poll()) != null) {
            if (lease.isActive() && lease.heapSlot < 0) {
                widestWindowNanos = Math.max(widestWindowNanos, lease.renewEveryNanos() / 4);
                heap.update(lease, dueAt(lease));
            }
        }
        if (heap.size() > 2 * leases.size() + HOUSEKEEPING_BATCH) {
            heap.retainActive();
            widestWindowNanos = heap.widestWindowNanos();
        }
    }

    /** When the timer must fire for this lease at the latest. */
    private static long dueAt(HeldLease lease) {
        long deadline = lease.deadline();
        long due = lease.renewing || lease.isFrozen() || lease.capLimited || lease.renewAt - deadline >= 0
                ? deadline : lease.renewAt;
        return lease.capped && lease.capAt - due < 0 ? lease.capAt : due;
    }

    /**
     * A binary min-heap of leases by {@link HeldLease#dueAt}, in which each lease knows its slot
     * ({@link HeldLease#heapSlot}, −1 when absent), so that it can be moved or removed in O(log n). Confined
     * to the worker. Times compare by their difference, as {@link System#nanoTime()} values must.
     */
    static final class LeaseHeap {

        private HeldLease[] slots = new HeldLease[16];
        private int size;

        int size() {
            return size;
        }

        /** Sets the lease's due time and moves it to its place; adds it if absent. */
        void update(HeldLease lease, long dueAt) {
            lease.dueAt = dueAt;
            int i = lease.heapSlot;
            if (i < 0) {
                if (size == slots.length) {
                    slots = Arrays.copyOf(slots, size * 2);
                }
                i = size++;
                place(lease, i);
            }
            siftDown(siftUp(i));
        }

        void remove(HeldLease lease) {
            int i = lease.heapSlot;
            if (i < 0) {
                return;
            }
            lease.heapSlot = -1;
            HeldLease last = slots[--size];
            slots[size] = null;
            if (i != size) {
                place(last, i);
                siftDown(siftUp(i));
            }
        }

        /** The earliest lease still held, after removing released and lost ones from the top. */
        @Nullable HeldLease firstActive() {
            while (size > 0 && !slots[0].isActive()) {
                remove(slots[0]);
            }
            return size > 0 ? slots[0] : null;
        }

        /**
         * The leases due by {@code limit}, in O(k) for k of them: the heap property lets the search stop at
         * every lease due later, since all below it are due later still.
         */
        List<HeldLease> dueBy(long limit) {
            List<HeldLease> found = new ArrayList<>();
            if (size == 0 || slots[0].dueAt - limit > 0) {
                return found;
            }
            int[] pending = new int[16];
            int head = 0;
            int tail = 0;
            pending[tail++] = 0;
            while (head < tail) {
                int i = pending[head++];
                found.add(slots[i]);
                for (int child = 2 * i + 1; child <= 2 * i + 2 && child < size; child++) {
                    if (slots[child].dueAt - limit <= 0) {
                        if (tail == pending.length) {
                            pending = Arrays.copyOf(pending, tail * 2);
                        }
                        pending[tail++] = child;
                    }
                }
            }
            return found;
        }

        /** Drops every lease no longer held, in O(n), and gives memory back if the heap shrank a lot. */
        void retainActive() {
            int kept = 0;
            for (int i = 0; i < size; i++) {
                HeldLease lease = slots[i];
                if (lease.isActive()) {
                    place(lease, kept++);
                } else {
                    lease.heapSlot = -1;
                }
            }
            Arrays.fill(slots, kept, size, null);
            size = kept;
            if (slots.length > 64 && slots.length > 4 * size) {
                slots = Arrays.copyOf(slots, Math.max(16, 2 * size));
            }
            for (int i = size / 2 - 1; i >= 0; i--) {
                siftDown(i);
            }
        }

        /** The widest batching window among the leases in the heap. */
        long widestWindowNanos() {
            long widest = 0;
            for (int i = 0; i < size; i++) {
                widest = Math.max(widest, slots[i].renewEveryNanos() / 4);
            }
            return widest;
        }

        private int siftUp(int i) {
            HeldLease lease = slots[i];
            while (i > 0) {
                int parent = (i - 1) / 2;
                if (slots[parent].dueAt - lease.dueAt <= 0) {
                    break;
                }
                place(slots[parent], i);
                i = parent;
            }
            place(lease, i);
            return i;
        }

        private void siftDown(int i) {
            HeldLease lease = slots[i];
            int half = size / 2;
            while (i < half) {
                int child = 2 * i + 1;
                int right = child + 1;
                if (right < size && slots[right].dueAt - slots[child].dueAt < 0) {
                    child = right;
                }
                if (lease.dueAt - slots[child].dueAt <= 0) {
                    break;
                }
                place(slots[child], i);
                i = child;
            }
            place(lease, i);
        }

        private void place(HeldLease lease, int i) {
            slots[i] = lease;
            lease.heapSlot = i;
        }
    }
}
