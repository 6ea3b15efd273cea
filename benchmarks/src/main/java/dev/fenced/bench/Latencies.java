package dev.fenced.bench;

import java.util.Arrays;

/** Latencies in nanoseconds, recorded by many threads into a preallocated array. Thread-safe for record. */
final class Latencies {

    private final long[] values;
    private final java.util.concurrent.atomic.AtomicInteger next = new java.util.concurrent.atomic.AtomicInteger();

    Latencies(int capacity) {
        this.values = new long[capacity];
    }

    void record(long nanos) {
        int i = next.getAndIncrement();
        if (i < values.length) {
            values[i] = nanos;
        }
    }

    /** The given percentile (0..100) in microseconds, or -1 when nothing was recorded. */
    double percentileMicros(double percentile) {
        int n = Math.min(next.get(), values.length);
        if (n == 0) {
            return -1;
        }
        long[] sorted = Arrays.copyOf(values, n);
        Arrays.sort(sorted);
        int index = (int) Math.min(n - 1, Math.max(0, Math.ceil(percentile / 100.0 * n) - 1));
        return sorted[index] / 1_000.0;
    }
}
