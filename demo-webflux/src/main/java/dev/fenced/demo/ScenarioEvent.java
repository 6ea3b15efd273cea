package dev.fenced.demo;

import org.jspecify.annotations.Nullable;

/**
 * One event of the replayed scenario.
 *
 * @param offsetMs milliseconds since the scenario started
 * @param lane {@code lock-service}, {@code worker-a}, {@code worker-b} or {@code database}
 * @param kind a short machine-readable name, such as {@code granted} or {@code rejected}
 * @param label a few words for the timeline, such as "grants B" or "rejects A's write"
 * @param token the fencing token involved, if any
 * @param outcome {@code ok}, {@code waiting}, {@code lost}, {@code rejected}, {@code stale} (a stale write was
 *     accepted) or {@code info}
 * @param detail what happened, for people
 */
public record ScenarioEvent(long offsetMs, String lane, String kind, String label, @Nullable Long token,
        String outcome, String detail) {
}
