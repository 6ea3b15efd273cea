package dev.fenced.demo;

import org.jspecify.annotations.Nullable;

/**
 * One event of the scheduled job on the demo's two instances: a tick's outcome, a pause, a resumption, or what
 * PostgreSQL answered to a tick's fenced write.
 *
 * @param seq the event's number, increasing (per stream: the live schedule, or one replay)
 * @param job the job's name (its lock name)
 * @param tick the tick it belongs to, counted from 1
 * @param instance {@code instance-1} or {@code instance-2}
 * @param kind {@code started}, an outcome ({@code ran}, {@code skipped}, {@code failed}, {@code lost},
 *     {@code cut-off}, {@code unavailable}), {@code paused}, {@code resumed}, {@code write-accepted} or
 *     {@code write-refused}
 * @param token the fencing token involved, if any
 * @param outcome {@code ok}, {@code info}, {@code lost} or {@code rejected}, for the page's colours
 * @param detail what happened, for people
 */
public record JobEvent(long seq, String job, int tick, String instance, String kind, @Nullable Long token,
        String outcome, String detail) {
}
