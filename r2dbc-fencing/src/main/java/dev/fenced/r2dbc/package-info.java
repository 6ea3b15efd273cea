/**
 * Storage-side enforcement of fencing tokens for PostgreSQL and MariaDB/MySQL over R2DBC (the dialect is read
 * from the connection); on a {@code ConnectionFactory}, the statements join
 * the subscriber's Spring transaction when there is one ({@code spring-r2dbc} is an optional dependency).
 *
 * <ul>
 *   <li>{@link dev.fenced.r2dbc.FencedWrite}: a token-guarded {@code UPDATE} or upsert of a table that carries
 *       token and owner columns, or the token column alone, and the claim step of a read-modify-write;</li>
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
