package dev.fenced.demo;

import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The answer of {@code POST /scenario/replay}.
 *
 * @param invoiceId the invoice created for this run
 * @param lockName the lock both workers used
 * @param howThePauseIsMade how worker A is paused, in plain words
 * @param workerALeaseMs the lease time worker A acquired with
 * @param tokenA worker A's token
 * @param tokenB worker B's token
 * @param workerARejected whether the database rejected worker A's late write
 * @param workerBDataKept whether the row holds worker B's write at the end
 * @param rejection the rejection's message, if any
 * @param finalInvoice the row at the end
 * @param events the timeline, in time order
 */
public record ScenarioReport(long invoiceId, String lockName, String howThePauseIsMade, long workerALeaseMs,
        long tokenA, long tokenB, boolean workerARejected, boolean workerBDataKept, @Nullable String rejection,
        Invoice finalInvoice, List<ScenarioEvent> events) {
}
