package dev.fenced.demo;

import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The answer of {@code POST /jobs/replay}: three scripted ticks of the scheduled job on the demo's two instances,
 * the second one's runner paused past lockAtMostFor.
 *
 * @param job the job's name, fresh for this replay
 * @param lockAtMostForMs the job's lockAtMostFor
 * @param lockAtLeastForMs the job's lockAtLeastFor
 * @param stalledToken the token of the paused instance's tick
 * @param nextToken the token of the other instance's next tick
 * @param lateWriteRefused whether PostgreSQL refused the paused instance's late write
 * @param refusal the refusal's message, if any
 * @param finalRow the job's row at the end
 * @param events what happened, in order
 */
public record JobReplayReport(String job, long lockAtMostForMs, long lockAtLeastForMs, long stalledToken,
        long nextToken, boolean lateWriteRefused, @Nullable String refusal, JobReportRow finalRow,
        List<JobEvent> events) {
}
