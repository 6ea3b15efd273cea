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

    /** A held grant, claimed and read, waiting for its write. */
    record Step(Grant grant, long balance, String opId, long acquiredAt) {
    }

    void fullOperation(String resource, String opId) {
        Step step = acquireClaimRead(resource, opId);
        if (step != null) {
            writeAndRelease(step, false);
        }
    }

    /** Acquires, claims and reads; empty (the operation recorded) if it could not. */
    @Nullable Step acquireClaimRead(String resource, String opId) {
        Grant grant;
        try {
            grant = locker.acquire(resource);
        } catch (Locker.AcquireFailedException e) {
            context.history.acquireFailed(e);
            return null;
        }
        context.history.acquired(grant);
        context.track(grant);
        long acquiredAt = System.nanoTime();
        try {
            return new Step(grant, context.ledger.claimAndRead(context.setup.arm(), grant), opId, acquiredAt);
        } catch (RuntimeException e) {
            finish(grant, opId, acquiredAt, Worker.isStale(e) ? History.Outcome.STALE : History.Outcome.LOST,
                    History.Step.CLAIM, 0, false, String.valueOf(e.getMessage()), Worker.storedOwner(e));
            return null;
        }
    }

    /** Writes balance + 1 (with a lease view that still believes it is held, if {@code believed}), releases. */
    void writeAndRelease(Step step, boolean believed) {
        Grant grant = step.grant();
        Arm arm = context.setup.arm();
        @Nullable FencedLease view = arm == Arm.PLAIN_TTL ? null : believed ? grant.believed() : grant.lease();
        long writeInvokedAt = System.nanoTime();
        History.Outcome outcome;
        String detail = "";
        String rejectedBy = null;
        try {
            context.ledger.write(arm, grant, view, step.balance() + 1, step.opId());
            outcome = History.Outcome.OK;
        } catch (RuntimeException e) {
            outcome = Worker.isStale(e) ? History.Outcome.STALE : History.Outcome.UNKNOWN;
            detail = String.valueOf(e.getMessage());
            rejectedBy = Worker.storedOwner(e);
        }
        finish(grant, step.opId(), step.acquiredAt(), outcome, History.Step.WRITE, writeInvokedAt, believed, detail,
                rejectedBy);
    }

    private void finish(Grant grant, String opId, long acquiredAt, History.Outcome outcome, History.Step step,
            long writeInvokedAt, boolean believed, String detail, @Nullable String rejectedBy) {
        long completedAt = System.nanoTime();
        try {
            grant.release();
        } catch (RuntimeException e) {
            // It expires by itself; the record shows whether its loss was signalled.
        }
        context.untrack(grant);
        context.history.record(new History.Op(opId, name, grant.resource(), grant.token(), grant.owner(), outcome, step,
                acquiredAt, writeInvokedAt, completedAt, believed, believed, grant.record(), detail, rejectedBy));
    }
}
