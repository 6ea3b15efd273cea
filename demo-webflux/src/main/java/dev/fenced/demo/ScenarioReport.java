package dev.fenced.demo;

import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The answer of {@code POST /scenario/replay} (with fencing) and {@code POST /scenario/replay-without-fencing}.
 *
 * @param fencing whether this run used Fenced's lease and token-guarded write, or a plain TTL lock and an unguarded
 *     write
 * @param invoiceId the invoice created for this run
 * @param lockName the lock both workers used
 * @param howThePauseIsMade how worker A is paused, in plain words
 * @param workerALeaseMs the lease time worker A acquired with
 * @param tokenA worker A's token, {@code null} without fencing
 * @param tokenB worker B's token, {@code null} without fencing
 * @param workerARejected whether the database rejected worker A's late write
 * @param workerBDataKept whether the row holds worker B's write at the end
 * @param rejection the rejection's message, if any
 * @param finalInvoice the row at the end
 * @param events the timeline, in time order
 */
public record ScenarioReport(boolean fencing, long invoiceId, String lockName, String howThePauseIsMade,
        long workerALeaseMs, @Nullable Long tokenA, @Nullable Long tokenB, boolean workerARejected,
        boolean workerBDataKept, @Nullable String rejection, Invoice finalInvoice, List<ScenarioEvent> events) {
}
