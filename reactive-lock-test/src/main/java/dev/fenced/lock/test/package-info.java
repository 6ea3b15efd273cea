/**
 * A test kit for code that uses Fenced: {@link dev.fenced.lock.test.FencedLockTestKit} gives an in-memory
 * {@link dev.fenced.lock.FencedLockClient} with the semantics of the Redis one (tokens, renewal, waiting,
 * loss, cancel-safety), on a clock you drive, and the controls a test needs.
 */
@NullMarked
package dev.fenced.lock.test;

import org.jspecify.annotations.NullMarked;
