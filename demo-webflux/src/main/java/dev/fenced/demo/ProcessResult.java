package dev.fenced.demo;

/**
 * The answer of {@code POST /invoices/{id}/process}.
 *
 * @param invoice the invoice after the write
 * @param token the fencing token the write carried
 * @param lockName the lock that was held
 */
public record ProcessResult(Invoice invoice, long token, String lockName) {
}
