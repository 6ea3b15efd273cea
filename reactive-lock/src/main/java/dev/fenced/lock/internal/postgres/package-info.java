/**
 * The lease store on PostgreSQL, over R2DBC: the lease table and its statements, release notifications
 * through {@code LISTEN/NOTIFY} on one shared connection, and the classification of database errors.
 *
 * <p>Internal: may change without notice; do not use from application code.
 */
@NullMarked
package dev.fenced.lock.internal.postgres;

import org.jspecify.annotations.NullMarked;
