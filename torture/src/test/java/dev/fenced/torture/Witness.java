package dev.fenced.torture;

import dev.fenced.lock.FencedLease;
import org.jspecify.annotations.Nullable;

/**
 * A scripted client of a witness interleaving: the same steps as a {@link Worker}'s operation, taken one at a
 * time so that the nemesis can order them against a fault, and recorded in the history the same way.
 */
final class Witness {

    private final Run.Context context;
    private final String name;
    private final Locker locker;

    Witness(Run.Context context, String name, Locker locker) {
        this.context = context;
        this.name = name;
        this.locker = locker;
    }

    /** A held grant, not yet claimed: its holder has not written anything. */
    record Held(Grant grant, String opId, long acquireInvokedAt, long acquiredAt) {
    }

    /** A held grant, claimed and read, waiting for its write. */
    record Step(Held held, long balance) {

        Grant grant() {
            return held.grant();
        }
    }

    void fullOperation(String resource, String opId) {
        Step step = acquireClaimRead(resource, opId);
        if (step != null) {
            writeAndRelease(step, false);
        }
    }

    /** Acquires, claims and reads; empty (the operation recorded) if it could not. */
    @Nullable Step acquireClaimRead(String resource, String opId) {
        Held held = acquire(resource, opId);
        return held == null ? null : claimAndRead(held, false);
    }

    /** Acquires, and nothing more; empty (the failure recorded) if it could not. */
    @Nullable Held acquire(String resource, String opId) {
        long acquireInvokedAt = System.nanoTime();
        Grant grant;
        try {
            grant = locker.acquire(resource);
        } catch (Locker.AcquireFailedException e) {
            context.history.acquireFailed(e);
            return null;
        }
        context.history.acquired(grant);
        context.track(grant);
        return new Held(grant, opId, acquireInvokedAt, System.nanoTime());
    }

    /**
     * Freezes this witness's renewal thread for {@code millis}, as a stop-the-world pause would, and then thaws the
     * grant; returns at once. Join the returned thread to wait for the thaw.
     */
    Thread stall(Held held, long millis) {
        Thread thread = new Thread(() -> {
            try {
                locker.pause(millis);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                held.grant().thawed();
            }
        }, "torture-stall-" + name);
        thread.setDaemon(true);
        thread.start();
        return thread;
    }

    /**
     * Claims and reads (with a lease view that still believes it is held, if {@code believed}: the holder checked
     * its lease, then paused); empty (the operation recorded) if storage refused the claim.
     */
    @Nullable Step claimAndRead(Held held, boolean believed) {
        Grant grant = held.grant();
        @Nullable FencedLease view = view(grant, believed);
        try {
            return new Step(held, context.ledger.claimAndRead(context.setup.arm(), grant, view));
        } catch (RuntimeException e) {
            finish(held, Worker.isStale(e) ? History.Outcome.STALE : History.Outcome.LOST, History.Step.CLAIM, 0,
                    believed, String.valueOf(e.getMessage()), Worker.storedOwner(e));
            return null;
        }
    }

    /**
     * The holder wakes from a stall that came after its last check: claims, reads, writes balance + 1 and releases,
     * all with a view of the lease that still believes it is held.
     */
    void wakeAndWrite(Held held) {
        Step step = claimAndRead(held, true);
        if (step != null) {
            writeAndRelease(step, true);
        }
    }

    /** A held grant of the lock-set workload whose row was claimed (the fenced arms) and read, waiting for its write. */
    record SetStep(Held held, Ledger.SetState state) {
    }

    /**
     * The lock-set workload's claim and read ({@link Ledger#claimAndReadSet}), then the holder's last check of its
     * lease (none on {@link Arm#UNFENCED_ROW}); empty (the operation recorded) if storage refused the claim or the
     * lease was gone by the check.
     */
    @Nullable SetStep claimReadSetAndCheck(Held held) {
        Ledger.SetState state;
        try {
            state = context.ledger.claimAndReadSet(context.setup.arm(), held.grant());
        } catch (RuntimeException e) {
            finish(held, Worker.isStale(e) ? History.Outcome.STALE : History.Outcome.LOST, History.Step.CLAIM, 0, false,
                    String.valueOf(e.getMessage()), Worker.storedOwner(e));
            return null;
        }
        if (context.setup.arm() != Arm.UNFENCED_ROW && !held.grant().isHeld()) {
            finish(held, History.Outcome.LOST, History.Step.CLAIM, 0, false, "lease lost before the write", null);
            return null;
        }
        return new SetStep(held, state);
    }

    /**
     * Writes the read set back with this operation's id added ({@link Ledger#writeSet}; with a lease view that still
     * believes it is held, if {@code believed}) and releases; returns the write's outcome, as recorded.
     */
    History.Outcome writeSetAndRelease(SetStep step, boolean believed) {
        String opId = step.held().opId();
        return writeThenRelease(step.held(), believed, view -> context.ledger.writeSet(context.setup.arm(),
                step.held().grant(), view, step.state().balance() + 1, step.state().with(opId), opId));
    }

    /** Releases a grant that will not be written with, recorded as lost. */
    void abandon(Held held, String why) {
        finish(held, History.Outcome.LOST, History.Step.CLAIM, 0, false, why, null);
    }

    /**
     * Writes balance + 1 (with a lease view that still believes it is held, if {@code believed}), releases; returns
     * the write's outcome, as recorded.
     */
    History.Outcome writeAndRelease(Step step, boolean believed) {
        return writeThenRelease(step.held(), believed, view -> context.ledger.write(context.setup.arm(), step.grant(),
                view, step.balance() + 1, step.held().opId()));
    }

    /**
     * Runs {@code write} with the lease view ({@link #view}), then releases and records the outcome: OK, STALE if
     * storage refused the token, else UNKNOWN.
     */
    private History.Outcome writeThenRelease(Held held, boolean believed,
            java.util.function.Consumer<@Nullable FencedLease> write) {
        long writeInvokedAt = System.nanoTime();
        History.Outcome outcome;
        String detail = "";
        String rejectedBy = null;
        try {
            write.accept(view(held.grant(), believed));
            outcome = History.Outcome.OK;
        } catch (RuntimeException e) {
            outcome = Worker.isStale(e) ? History.Outcome.STALE : History.Outcome.UNKNOWN;
            detail = String.valueOf(e.getMessage());
            rejectedBy = Worker.storedOwner(e);
        }
        finish(held, outcome, History.Step.WRITE, writeInvokedAt, believed, detail, rejectedBy);
        return outcome;
    }

    private @Nullable FencedLease view(Grant grant, boolean believed) {
        return context.setup.arm() == Arm.PLAIN_TTL ? null : believed ? grant.believed() : grant.lease();
    }

    private void finish(Held held, History.Outcome outcome, History.Step step, long writeInvokedAt, boolean believed,
            String detail, @Nullable String rejectedBy) {
        Grant grant = held.grant();
        long completedAt = System.nanoTime();
        try {
            grant.release();
        } catch (RuntimeException e) {
            // It expires by itself; the record shows whether its loss was signalled.
        }
        context.untrack(grant);
        context.history.record(new History.Op(held.opId(), name, grant.resource(), grant.token(), grant.owner(), outcome,
                step, held.acquireInvokedAt(), held.acquiredAt(), writeInvokedAt, completedAt, believed, believed,
                grant.record(), detail, rejectedBy));
    }
}
