package dev.fenced.demo;

import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The demo's locks now: what {@code GET /locks} answers and {@code GET /locks/stream} sends every 500 ms.
 *
 * @param locks the held locks under the demo's key prefix, by name (at most {@link LocksController#SHOWN})
 * @param error why the view could not be read this time, if it could not
 */
public record LocksSnapshot(List<LockRow> locks, @Nullable String error) {
}
