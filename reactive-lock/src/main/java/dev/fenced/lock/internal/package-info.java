/**
 * Implementation of Fenced's lock client: the lease lifecycle (acquire, wait, renewal, loss, release)
 * over a narrow {@link dev.fenced.lock.internal.LeaseStore} interface, with a Redis store and an
 * in-memory store driven by the scheduler's clock.
 *
 * <p>Internal: these types are public only so that Fenced's own modules and tests can reach them. They
 * may change without notice; do not use them from application code.
 */
@NullMarked
package dev.fenced.lock.internal;

import org.jspecify.annotations.NullMarked;
