/**
 * Spring Integration on Fenced: {@link dev.fenced.integration.FencedLockRegistry} is a Spring Integration
 * {@code LockRegistry} whose locks are Fenced leases, so that an application moves from
 * {@code RedisLockRegistry} or {@code JdbcLockRegistry} by replacing one bean.
 *
 * <p>This is a blocking API, as {@code java.util.concurrent.locks.Lock} is: its locks block the calling thread
 * while they wait for the lock service, and every such call on a Reactor non-blocking thread fails at once with
 * {@link dev.fenced.integration.NonBlockingThreadException}. Reactive code uses
 * {@link dev.fenced.lock.FencedLockClient} directly.
 */
@NullMarked
package dev.fenced.integration;

import org.jspecify.annotations.NullMarked;
