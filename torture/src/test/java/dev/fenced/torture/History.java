package dev.fenced.torture;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;

/**
 * Everything recorded while a scenario runs: every operation with its outcome, every successful and failed
 * acquire, every fault with when it was injected and healed, and locks found orphaned. Times are
 * {@link System#nanoTime()} (CLOCK_MONOTONIC, shared with the child JVM on Linux). Thread-safe.
 */
final class History {

    private final List<Op> ops = new CopyOnWriteArrayList<>();
    private final List<Long> acquires = new CopyOnWriteArrayList<>();
    private final List<Fault> faults = new CopyOnWriteArrayList<>();
    private final Set<String> knownOwners = ConcurrentHashMap.newKeySet();
    private final AtomicInteger acquireFailures = new AtomicInteger();
    private final java.util.Map<String, AtomicInteger> failureReasons = new ConcurrentHashMap<>();
    private final List<String> orphans = new CopyOnWriteArrayList<>();
    private final Object acquired = new Object();

    void record(Op op) {
        ops.add(op);
    }

    void acquired(Grant grant) {
        knownOwners.add(grant.owner());
        acquires.add(System.nanoTime());
        synchronized (acquired) {
            acquired.notifyAll();
        }
    }

    void knownOwner(String owner) {
        knownOwners.add(owner);
    }

    boolean isKnownOwner(String owner) {
        return knownOwners.contains(owner);
    }

    void acquireFailed(Throwable cause) {
        acquireFailures.incrementAndGet();
        Throwable root = cause;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        String message = String.valueOf(root.getMessage());
        String key = root.getClass().getSimpleName() + ": " + message.substring(0, Math.min(90, message.length()));
        failureReasons.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
    }

    /** Why acquires failed, by root cause, most frequent first. */
    List<String> acquireFailureReasons() {
        return failureReasons.entrySet().stream()
                .sorted((a, b) -> b.getValue().get() - a.getValue().get())
                .map(e -> e.getValue().get() + "x " + e.getKey())
                .toList();
    }

    void orphan(String description) {
        orphans.add(description);
    }

    /** Records a fault; {@code healedAt} is when the system was whole again (the nemesis stopped it). */
    void fault(String kind, long injectedAt, long healedAt) {
        faults.add(new Fault(kind, injectedAt, healedAt));
    }

    /** Waits until some worker acquired a lock at or after {@code since}; false if none did within the timeout. */
    boolean awaitAcquireAfter(long since, long timeoutNanos) throws InterruptedException {
        long giveUp = System.nanoTime() + timeoutNanos;
        synchronized (acquired) {
            while (firstAcquireAfter(since) == null) {
                long left = giveUp - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                TimeUnit.NANOSECONDS.timedWait(acquired, left);
            }
            return true;
        }
    }

    @Nullable Long firstAcquireAfter(long since) {
        Long first = null;
        for (long at : acquires) {
            if (at - since >= 0 && (first == null || at - first < 0)) {
                first = at;
            }
        }
        return first;
    }

    /** How many operations were recorded so far. */
    int operationCount() {
        return ops.size();
    }

    /** How many fenced writes storage accepted or refused so far (outcome {@link Outcome#OK} or {@link Outcome#STALE}). */
    int fencedWriteCount() {
        int count = 0;
        for (Op op : ops) {
            if (op.outcome() == Outcome.OK || op.outcome() == Outcome.STALE) {
                count++;
            }
        }
        return count;
    }

    List<Op> ops() {
        return new ArrayList<>(ops);
    }

    List<Fault> faults() {
        return new ArrayList<>(faults);
    }

    int acquireFailures() {
        return acquireFailures.get();
    }

    int acquireCount() {
        return acquires.size();
    }

    List<String> orphans() {
        return new ArrayList<>(orphans);
    }

    /** How an operation ended. */
    enum Outcome {
        /** The write committed and was acknowledged. */
        OK,
        /** Storage rejected the token; nothing was committed. */
        STALE,
        /** The worker knew its lease was lost (or the claim could not be made) and wrote nothing. */
        LOST,
        /** The write was sent and its outcome is unknown (a timeout or a broken connection). */
        UNKNOWN
    }

    /** Where an operation ended. */
    enum Step { CLAIM, WRITE }

    /**
     * One operation of the workload: acquire, claim and read, stall, write, release.
     *
     * @param acquireInvokedAt when the acquire that produced the lease was invoked, for I6's grant order
     * @param acquiredAt when that acquire had completed (the lease was in the holder's hands)
     * @param paused whether the worker was frozen longer than the lease before writing
     * @param believed whether it wrote with a view of the lease that still believed it was held
     * @param rejectedByOwner for a stale rejection, the owner of the token storage held, if known
     */
    record Op(String id, String worker, String resource, long token, String owner, Outcome outcome, Step step,
            long acquireInvokedAt, long acquiredAt, long writeInvokedAt, long completedAt, boolean paused, boolean believed,
            Grant.LeaseRecord lease, String detail, @Nullable String rejectedByOwner) {

        /**
         * Whether this operation's lease was granted before {@code other}'s, by real time: its acquire had completed
         * before the other's was invoked. Overlapping acquires are unordered (neither was granted before the other).
         */
        boolean grantedBefore(Op other) {
            return acquiredAt - other.acquireInvokedAt < 0;
        }
    }

    /** One fault of the nemesis. */
    record Fault(String kind, long injectedAt, long healedAt) {
    }
}
