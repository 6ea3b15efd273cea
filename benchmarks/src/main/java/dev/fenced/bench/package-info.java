/**
 * The benchmark harness: measures Fenced against a bare Lettuce lock and the Redis round-trip limit in one
 * run, and writes the results with ratios. Not part of the library.
 */
@NullMarked
package dev.fenced.bench;

import org.jspecify.annotations.NullMarked;
