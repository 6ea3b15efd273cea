/**
 * The benchmark harness: measures Fenced against a bare Lettuce lock, Redisson's locks and the Redis
 * round-trip limit, and fenced against plain writes on PostgreSQL, in one run, and writes the results with
 * ratios. Not part of the library.
 */
@NullMarked
package dev.fenced.bench;

import org.jspecify.annotations.NullMarked;
