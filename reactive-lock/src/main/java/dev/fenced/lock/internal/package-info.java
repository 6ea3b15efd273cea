/**
 * Implementation of Fenced's lock client: the lease lifecycle (acquire, wait, renewal, loss, release,
 * cancel-safety, nesting) over the narrow {@link dev.fenced.lock.internal.LeaseStore} interface. Nothing here
 * knows Redis or R2DBC: the Redis store and its connections live in {@code internal.redis}, the PostgreSQL
 * store in {@code internal.postgres}, the in-memory store in {@code internal.memory}; dependencies go one way,
 * from those packages to this one.
 *
 * <p>Internal: these types are public only so that Fenced's own modules and tests can reach them. They
 * may change without notice; do not use them from application code.
 */
@NullMarked
package dev.fenced.lock.internal;

import org.jspecify.annotations.NullMarked;
