package dev.fenced.demo;

import java.util.List;

/**
 * The answer of {@code POST /jobs/stall}.
 *
 * @param armed whether a pause was armed (false: one is waiting or running already; the status is then 409)
 * @param after the number of the last event before the pause was armed: every event of this pause is numbered above
 * @param events with {@code wait=true}, the events from the pause on, up to the answer to the paused instance's
 *     write; else none
 */
public record JobStall(boolean armed, long after, List<JobEvent> events) {
}
