package dev.fenced.r2dbc;

import dev.fenced.lock.StaleFencingTokenException;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;
import reactor.core.publisher.Mono;

/** Wraps a fenced write in an observation; loaded only when a registry was given (Micrometer present). */
final class WriteObservation {

    private WriteObservation() {
    }

    static Mono<Long> observe(Mono<Long> write, Object registry, String table, String lockName) {
        return Mono.defer(() -> {
            Observation observation = Observation.createNotStarted("fenced.write", (ObservationRegistry) registry)
                    .contextualName("fenced write " + table)
                    .lowCardinalityKeyValue("fenced.table", table)
                    .highCardinalityKeyValue("fenced.lock.name", lockName)
                    .start();
            return write
                    .doOnSuccess(rows -> observation.lowCardinalityKeyValue("outcome", "written").stop())
                    .doOnError(error -> {
                        String outcome = error instanceof StaleFencingTokenException ? "stale"
                                : error instanceof FencedRowNotFoundException ? "not_found"
                                : error instanceof FencedWriteConflictException ? "conflict" : "error";
                        observation.lowCardinalityKeyValue("outcome", outcome).error(error).stop();
                    })
                    .doOnCancel(() -> observation.lowCardinalityKeyValue("outcome", "cancelled").stop());
        });
    }
}
