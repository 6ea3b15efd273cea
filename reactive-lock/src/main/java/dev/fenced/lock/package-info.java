/**
 * Fenced: non-blocking distributed leases with fencing tokens, for Reactor.
 *
 * <p>Start with {@link dev.fenced.lock.FencedLockClient#builder()}. A {@link dev.fenced.lock.FencedLease}
 * carries a fencing token that strictly increases with every grant of a lock name; pass it with every
 * write so that the storage can reject the writes of a holder whose lease silently expired. A lost lease
 * is never silent: {@link dev.fenced.lock.FencedLease#lost()} signals it, and
 * {@link dev.fenced.lock.FencedLockClient#withLease(String, java.util.function.Function) withLease}
 * cancels the work and emits {@link dev.fenced.lock.LeaseLostException}.
 *
 * <p>Nothing in this package blocks a thread, except {@link dev.fenced.lock.FencedLockClient#close()},
 * which says so.
 */
@NullMarked
package dev.fenced.lock;

import org.jspecify.annotations.NullMarked;
