package dev.fenced.demo;

import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The body of {@code POST /invoices/settle}: either {@code ids}, or the range {@code from..to} (inclusive).
 *
 * @param ids the invoices to settle
 * @param from the first id of a range
 * @param to the last id of a range
 */
public record SettleRequest(@Nullable List<Long> ids, @Nullable Long from, @Nullable Long to) {
}
