package dev.fenced.demo;

import org.jspecify.annotations.Nullable;

/**
 * The row a tick of the scheduled job writes (table {@code job_reports}), through a fenced upsert.
 *
 * @param job the job's name, the key
 * @param tick the tick that wrote it
 * @param writtenBy the instance that wrote it
 * @param fencingToken the token of the write
 */
public record JobReportRow(String job, int tick, String writtenBy, @Nullable Long fencingToken) {
}
