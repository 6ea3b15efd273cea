package dev.fenced.torture;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.LeaseNotHeldException;
import dev.fenced.lock.StaleFencingTokenException;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.jspecify.annotations.Nullable;

/**
 * One worker of the workload, on its own thread: repeatedly acquire a random resource, claim it and read
 * its balance, stall (a share of stalls freeze the worker and its renewal thread for longer than the lease),
 * write balance + 1 with an audit row in one transaction, release. Every operation is recorded in the
 * {@link History} with its outcome. Half of the writes after a stall carry a lease view that still believes
 * it is held: the pause came after the holder's last check, the worst case storage must catch.
 */
final class Worker implements Runnable {

    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(Worker.class);

    /**
     * The shape of the workload.
     *
     * @param lockSet Jepsen's lock-set workload instead of the increments: each operation reads the row's set, pauses
     *     (renewals frozen) for a uniform time of up to {@link #LOCK_SET_PAUSE} of the lease, before or after its last
     *     check of the lease, and writes the set back with its own element added (and the increment and audit row, so
     *     that I1 to I6 apply as well); the checker's I7 then looks for acknowledged elements missing from the final set
     * @param mutex which half of the fenced-mutex model check (M1, M2) the checker applies to the run's history
     */
    record Profile(Duration leaseTime, Duration maxWait, double longPauseShare, long shortPauseMaxMillis,
            double believedShare, boolean lockSet, Checker.Mutex mutex) {

        /** The longest pause of the lock-set workload, as a share of the lease: about one lease. */
        static final double LOCK_SET_PAUSE = 1.25;

        Profile(Duration leaseTime, Duration maxWait, double longPauseShare, long shortPauseMaxMillis,
                double believedShare) {
            this(leaseTime, maxWait, longPauseShare, shortPauseMaxMillis, believedShare, false, Checker.Mutex.NONE);
        }

        /** The lock-set workload with this profile's lease, maximum wait and share of believed views. */
        Profile lockSetWorkload() {
            return new Profile(leaseTime, maxWait, longPauseShare, shortPauseMaxMillis, believedShare, true, mutex);
        }

        /** This workload, with the fenced-mutex model check {@code mutex} over its history. */
        Profile withMutexCheck(Checker.Mutex check) {
            return new Profile(leaseTime, maxWait, longPauseShare, shortPauseMaxMillis, believedShare, lockSet, check);
        }

        long longPauseMillis(ThreadLocalRandom random) {
            long lease = leaseTime.toMillis();
            return lease + lease / 5 + random.nextLong(lease);
        }

        long lockSetPauseMillis(ThreadLocalRandom random) {
            return random.nextLong((long) (leaseTime.toMillis() * LOCK_SET_PAUSE) + 1);
        }
    }

    private final String name;
    private final Locker locker;
    private final Ledger ledger;
    private final Arm arm;
    private final List<String> resources;
    private final History history;
    private final Profile profile;
    private final BooleanSupplier running;
    private final Set<Grant> active;
    private int sequence;

    Worker(String name, Locker locker, Ledger ledger, Arm arm, List<String> resources, History history, Profile profile,
            BooleanSupplier running, Set<Grant> active) {
        this.name = name;
        this.locker = locker;
        this.ledger = ledger;
        this.arm = arm;
        this.resources = resources;
        this.history = history;
        this.profile = profile;
        this.running = running;
        this.active = active;
    }

    @Override
    public void run() {
        ThreadLocalRandom random = ThreadLocalRandom.current();
        while (running.getAsBoolean() && !Thread.currentThread().isInterrupted()) {
            String resource = resources.get(random.nextInt(resources.size()));
            boolean longPause = random.nextDouble() < profile.longPauseShare();
            long pause = longPause ? profile.longPauseMillis(random) : random.nextLong(profile.shortPauseMaxMillis() + 1);
            boolean believed = arm != Arm.PLAIN_TTL && random.nextDouble() < profile.believedShare();
            try {
                if (profile.lockSet()) {
                    operateLockSet(resource, profile.lockSetPauseMillis(random), random.nextBoolean(), believed);
                } else {
                    operate(resource, longPause, pause, believed);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (RuntimeException e) {
                // A harness failure must not silently stop a worker: log it and go on.
                LOG.warn("Worker {} failed outside an operation's recorded steps", name, e);
            }
        }
    }

    /** One operation; also used by the scripted witnesses. */
    void operate(String resource, boolean longPause, long pauseMillis, boolean believed) throws InterruptedException {
        Grant grant;
        long acquireInvokedAt = System.nanoTime();
        try {
            grant = locker.acquire(resource);
        } catch (Locker.AcquireFailedException e) {
            history.acquireFailed(e);
            // The client fails fast while it reconnects; a real caller backs off before retrying.
            TimeUnit.MILLISECONDS.sleep(20 + ThreadLocalRandom.current().nextLong(30));
            return;
        }
        history.acquired(grant);
        active.add(grant);
        String opId = name + "-" + (++sequence);
        long acquiredAt = System.nanoTime();
        History.Outcome outcome = History.Outcome.LOST;
        History.Step step = History.Step.CLAIM;
        long writeInvokedAt = 0;
        String detail = "";
        String rejectedBy = null;
        try {
            long balance;
            try {
                balance = ledger.claimAndRead(arm, grant);
            } catch (RuntimeException e) {
                outcome = isStale(e) ? History.Outcome.STALE : History.Outcome.LOST;
                detail = String.valueOf(e.getMessage());
                rejectedBy = storedOwner(e);
                return;
            }
            // The holder's last check; a pause after it is what storage must catch.
            if (!grant.isHeld()) {
                outcome = History.Outcome.LOST;
                detail = "lease lost before the write";
                return;
            }
            if (longPause) {
                locker.pause(pauseMillis);
                grant.thawed();
            } else if (pauseMillis > 0) {
                TimeUnit.MILLISECONDS.sleep(pauseMillis);
            }
            step = History.Step.WRITE;
            @Nullable FencedLease view = arm == Arm.PLAIN_TTL ? null : believed ? grant.believed() : grant.lease();
            writeInvokedAt = System.nanoTime();
            outcome = write(grant, view, balance + 1, opId);
        } finally {
            long completedAt = System.nanoTime();
            try {
                grant.release();
            } catch (RuntimeException e) {
                // The lease expires by itself; the checker sees whether its loss was signalled.
            }
            active.remove(grant);
            history.record(new History.Op(opId, name, resource, grant.token(), grant.owner(), outcome, step,
                    acquireInvokedAt, acquiredAt, writeInvokedAt, completedAt, longPause, believed, grant.record(), detail,
                    rejectedBy));
        }
    }

    /**
     * One operation of Jepsen's lock-set workload: acquire; claim (the fenced arms) and read the row's set; pause for
     * {@code pauseMillis} with the renewal thread frozen, before the last check of the lease or, if
     * {@code pauseAfterCheck}, between that check and the write; write the set back with this operation's id added;
     * release. {@link Arm#UNFENCED_ROW} makes no check.
     */
    void operateLockSet(String resource, long pauseMillis, boolean pauseAfterCheck, boolean believed)
            throws InterruptedException {
        Grant grant;
        long acquireInvokedAt = System.nanoTime();
        try {
            grant = locker.acquire(resource);
        } catch (Locker.AcquireFailedException e) {
            history.acquireFailed(e);
            TimeUnit.MILLISECONDS.sleep(20 + ThreadLocalRandom.current().nextLong(30));
            return;
        }
        history.acquired(grant);
        active.add(grant);
        String opId = name + "-" + (++sequence);
        long acquiredAt = System.nanoTime();
        History.Outcome outcome = History.Outcome.LOST;
        History.Step step = History.Step.CLAIM;
        long writeInvokedAt = 0;
        String detail = "";
        String rejectedBy = null;
        boolean paused = false;
        try {
            Ledger.SetState state;
            try {
                state = ledger.claimAndReadSet(arm, grant);
            } catch (RuntimeException e) {
                outcome = isStale(e) ? History.Outcome.STALE : History.Outcome.LOST;
                detail = String.valueOf(e.getMessage());
                rejectedBy = storedOwner(e);
                return;
            }
            if (!pauseAfterCheck) {
                paused = stall(grant, pauseMillis);
            }
            if (arm != Arm.UNFENCED_ROW && !grant.isHeld()) {
                outcome = History.Outcome.LOST;
                detail = "lease lost before the write";
                return;
            }
            if (pauseAfterCheck) {
                paused = stall(grant, pauseMillis);
            }
            step = History.Step.WRITE;
            @Nullable FencedLease view = believed && pauseAfterCheck ? grant.believed() : grant.lease();
            writeInvokedAt = System.nanoTime();
            try {
                ledger.writeSet(arm, grant, view, state.balance() + 1, state.with(opId), opId);
                outcome = History.Outcome.OK;
            } catch (RuntimeException e) {
                outcome = isStale(e) ? History.Outcome.STALE
                        : causedBy(e, LeaseNotHeldException.class) || causedBy(e, LeaseLostException.class)
                                ? History.Outcome.LOST : History.Outcome.UNKNOWN;
                detail = String.valueOf(e.getMessage());
                rejectedBy = storedOwner(e);
            }
        } finally {
            long completedAt = System.nanoTime();
            try {
                grant.release();
            } catch (RuntimeException e) {
                // The lease expires by itself; the checker sees whether its loss was signalled.
            }
            active.remove(grant);
            history.record(new History.Op(opId, name, resource, grant.token(), grant.owner(), outcome, step,
                    acquireInvokedAt, acquiredAt, writeInvokedAt, completedAt, paused, believed && pauseAfterCheck,
                    grant.record(), detail, rejectedBy));
        }
    }

    /** A pause with the renewal thread frozen; true if it was longer than the lease could survive unrenewed. */
    private boolean stall(Grant grant, long millis) throws InterruptedException {
        if (millis <= 0) {
            return false;
        }
        locker.pause(millis);
        grant.thawed();
        return millis >= profile.leaseTime().toMillis();
    }

    private History.Outcome write(Grant grant, @Nullable FencedLease view, long newBalance, String opId) {
        try {
            ledger.write(arm, grant, view, newBalance, opId);
            return History.Outcome.OK;
        } catch (RuntimeException e) {
            if (isStale(e)) {
                return History.Outcome.STALE;
            }
            if (causedBy(e, LeaseNotHeldException.class) || causedBy(e, LeaseLostException.class)) {
                return History.Outcome.LOST;
            }
            return History.Outcome.UNKNOWN;
        }
    }

    static boolean isStale(Throwable e) {
        return causedBy(e, StaleFencingTokenException.class);
    }

    /** The owner of the token storage held when it rejected {@code e}'s write, if known. */
    static @Nullable String storedOwner(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof StaleFencingTokenException stale) {
                return stale.storedOwner();
            }
        }
        return null;
    }

    private static boolean causedBy(Throwable e, Class<? extends Throwable> type) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (type.isInstance(t)) {
                return true;
            }
            for (Throwable s : t.getSuppressed()) {
                if (type.isInstance(s)) {
                    return true;
                }
            }
        }
        return false;
    }
}
