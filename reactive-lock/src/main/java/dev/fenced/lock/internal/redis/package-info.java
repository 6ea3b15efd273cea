/**
 * The lease store on Redis or Valkey, through Lettuce's reactive API: one server, a Sentinel group or a
 * Redis Cluster; the connections, the Lua scripts (resources beside these classes) and the classification
 * of Redis errors.
 *
 * <p>Internal: may change without notice; do not use from application code.
 */
@NullMarked
package dev.fenced.lock.internal.redis;

import org.jspecify.annotations.NullMarked;
