/**
 * The lease store in memory, with the semantics of the Redis scripts on the scheduler's clock: the store of
 * virtual-time tests and of the test kit.
 *
 * <p>Internal: may change without notice; do not use from application code.
 */
@NullMarked
package dev.fenced.lock.internal.memory;

import org.jspecify.annotations.NullMarked;
