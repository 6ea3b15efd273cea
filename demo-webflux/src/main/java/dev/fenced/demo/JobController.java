package dev.fenced.demo;

import java.util.List;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.http.codec.ServerSentEvent;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** The scheduled job on two instances; see {@link JobService}. */
@RestController
class JobController {

    private final JobService jobs;

    JobController(JobService jobs) {
        this.jobs = jobs;
    }

    /** The live schedule's events as Server-Sent Events ({@code event: tick}): the recent ones, then each new one. */
    @GetMapping(path = "/jobs/events", produces = MediaType.TEXT_EVENT_STREAM_VALUE)
    Flux<ServerSentEvent<JobEvent>> events() {
        return jobs.liveEvents().map(e -> ServerSentEvent.builder(e).id(Long.toString(e.seq())).event("tick").build());
    }

    /** The live schedule's recent events numbered above {@code after}, for pages that poll instead. */
    @GetMapping(path = "/jobs/events", produces = MediaType.APPLICATION_JSON_VALUE)
    List<JobEvent> eventsAfter(@RequestParam(defaultValue = "0") long after) {
        return jobs.liveEventsAfter(after);
    }

    /**
     * Pauses the instance that runs the next tick: 200 with a {@link JobStall} at once, or with {@code wait=true} once
     * the paused instance's late write was answered, with the events from the pause on; 409 while a pause is waiting
     * or running.
     */
    @PostMapping("/jobs/stall")
    Mono<ResponseEntity<JobStall>> stall(@RequestParam(defaultValue = "false") boolean wait) {
        return jobs.stallNextTick(wait)
                .map(ResponseEntity::ok)
                .defaultIfEmpty(ResponseEntity.status(HttpStatus.CONFLICT).body(new JobStall(false, 0, List.of())));
    }

    /** Plays three scripted ticks with a pause past lockAtMostFor on a fresh job; see {@link JobService#replay()}. */
    @PostMapping("/jobs/replay")
    Mono<JobReplayReport> replay() {
        return jobs.replay();
    }
}
