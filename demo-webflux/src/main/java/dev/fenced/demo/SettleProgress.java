package dev.fenced.demo;

import org.jspecify.annotations.Nullable;

/**
 * One line of the NDJSON stream of {@code POST /invoices/settle}: the outcome of one invoice.
 *
 * @param id the invoice
 * @param outcome {@code SETTLED}, {@code ALREADY_SETTLED} or {@code FAILED}
 * @param token the fencing token of the lease it was settled under, if any
 * @param done how many invoices of the request are finished, this one included
 * @param total how many invoices the request has
 * @param inFlight how many invoices were being settled concurrently when this one started
 * @param maxInFlight the largest {@code inFlight} so far in this request (bounded by the concurrency)
 * @param error why it failed, for {@code FAILED}
 */
public record SettleProgress(long id, String outcome, @Nullable Long token, int done, int total, int inFlight,
        int maxInFlight, @Nullable String error) {
}
