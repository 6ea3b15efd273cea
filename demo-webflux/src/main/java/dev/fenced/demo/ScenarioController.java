package dev.fenced.demo;

import java.util.Map;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;

/** Replays the stalled-holder scenario, with and without fencing; see {@link ScenarioService}. */
@RestController
class ScenarioController {

    private final ScenarioService scenario;

    ScenarioController(ScenarioService scenario) {
        this.scenario = scenario;
    }

    @PostMapping("/scenario/replay")
    Mono<ScenarioReport> replay() {
        return scenario.replay();
    }

    /**
     * The fenced scenario with a stuck worker A: answers once A's late write was answered, after someone broke A's
     * lock ({@code POST /locks/force-release}), or after A's 30-second lease ran out.
     */
    @PostMapping("/scenario/replay-stuck")
    Mono<ScenarioReport> replayWithStuckHolder() {
        return scenario.replayWithStuckHolder();
    }

    /** Starts the stuck-holder scenario in the background: 202 with its id, to ask {@link #stuckRun} for its report. */
    @PostMapping("/scenario/stuck-runs")
    ResponseEntity<Map<String, String>> startStuckRun() {
        return ResponseEntity.status(HttpStatus.ACCEPTED).body(Map.of("id", scenario.startStuckRun()));
    }

    /**
     * The report of stuck run {@code id}: 200 once it ended, 202 while it runs (with {@code wait=true}: waits until
     * it ended), 404 for an unknown id.
     */
    @GetMapping("/scenario/stuck-runs/{id}")
    Mono<ResponseEntity<Object>> stuckRun(@PathVariable String id, @RequestParam(defaultValue = "false") boolean wait) {
        return scenario.stuckRun(id, wait)
                .flatMap(report -> report.<ResponseEntity<Object>>map(ResponseEntity::ok)
                        .defaultIfEmpty(ResponseEntity.status(HttpStatus.ACCEPTED).body(Map.of("state", "running"))))
                .defaultIfEmpty(ResponseEntity.notFound().build());
    }

    @PostMapping("/scenario/replay-without-fencing")
    Mono<ScenarioReport> replayWithoutFencing() {
        return scenario.replayWithoutFencing();
    }
}
