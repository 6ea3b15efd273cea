/**
 * Micrometer metrics and observations for Fenced: {@link dev.fenced.lock.micrometer.MicrometerLockObserver}.
 * Needs {@code io.micrometer:micrometer-core} on the class path (an optional dependency of Fenced).
 */
@NullMarked
package dev.fenced.lock.micrometer;

import org.jspecify.annotations.NullMarked;
