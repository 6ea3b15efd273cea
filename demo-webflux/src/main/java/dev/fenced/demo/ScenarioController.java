package dev.fenced.demo;

import org.springframework.web.bind.annotation.PostMapping;
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

    @PostMapping("/scenario/replay-without-fencing")
    Mono<ScenarioReport> replayWithoutFencing() {
        return scenario.replayWithoutFencing();
    }
}
