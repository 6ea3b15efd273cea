package dev.fenced.demo;

import org.jspecify.annotations.Nullable;

/**
 * An invoice as stored in the {@code invoices} table. Amounts are in cents.
 *
 * @param id the id
 * @param customer who is billed
 * @param status {@code OPEN}, {@code PROCESSED} or {@code SETTLED}
 * @param amount the invoice amount
 * @param ledgerTotal what has been booked to the ledger for this invoice
 * @param timesProcessed how many writes processed it (a lost update shows up here)
 * @param settlements how many times it was settled (the batch must make this exactly one)
 * @param processedBy who wrote last, for the scenario
 * @param fencingToken the token of the last accepted write, or {@code null} if never written under a lease
 * @param fencingOwner the owner of that token
 */
public record Invoice(
        long id,
        String customer,
        String status,
        long amount,
        long ledgerTotal,
        int timesProcessed,
        int settlements,
        @Nullable String processedBy,
        @Nullable Long fencingToken,
        @Nullable String fencingOwner) {
}
