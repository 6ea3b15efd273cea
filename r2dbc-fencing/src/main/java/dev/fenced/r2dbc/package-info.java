/**
 * Storage-side enforcement of fencing tokens for PostgreSQL over R2DBC.
 *
 * <ul>
 *   <li>{@link dev.fenced.r2dbc.FencedWrite}: a token-guarded {@code UPDATE} or {@code INSERT … ON CONFLICT}
 *       of a table that carries token and owner columns;</li>
 *   <li>{@link dev.fenced.r2dbc.FenceTable}: a fence row per resource, advanced as the first statement of a
 *       transaction, for tables that cannot carry the columns or for a lock that guards several rows.</li>
 * </ul>
 *
 * <p>A rejected write fails with {@link dev.fenced.lock.StaleFencingTokenException}; when storage holds a
 * newer token, the lease is told ({@link dev.fenced.lock.FencedLease#reportRejectedWrite}), so
 * {@code withLease} cancels its work (failing with {@link dev.fenced.lock.LeaseLostException} whose cause is
 * the rejection) and the next acquire takes a token above the stored one. Nothing here
 * blocks; identifiers are validated and quoted, values are always bound.
 */
@NullMarked
package dev.fenced.r2dbc;

import org.jspecify.annotations.NullMarked;
