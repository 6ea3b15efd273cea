package dev.fenced.demo;

import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.ForceReleaseResult;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import org.springframework.http.MediaType;
import org.springframework.http.codec.ServerSentEvent;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.server.ResponseStatusException;
import org.springframework.http.HttpStatus;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The locks panel: the fleet view ({@link FencedLockClient#locks(String)}) of every lock under the demo's key
 * prefix, held by any of its lock clients (the application's, the scenario's worker A, the job's two instances),
 * and the demo's "break this lock" ({@link FencedLockClient#forceRelease(String, String)}).
 */
@RestController
class LocksController {

    /** How often the stream reads the view. */
    static final Duration PERIOD = Duration.ofMillis(500);
    /** The most locks one snapshot shows (the view itself streams any number). */
    static final int SHOWN = 100;

    private final FencedLockClient locks;
    private final StalledLocks stalled;

    LocksController(FencedLockClient locks, StalledLocks stalled) {
        this.locks = locks;
        this.stalled = stalled;
    }

    /** The demo's held locks now. */
    @GetMapping("/locks")
    Mono<LocksSnapshot> snapshot() {
        return locks.locks("*").take(SHOWN)
                .map(l -> new LockRow(l.name(), l.token(), l.remaining().toMillis(), l.holderLabel(), l.waiters(),
                        stalled.isStalled(l.name())))
                .collectSortedList(Comparator.comparing(LockRow::name))
                .map(rows -> new LocksSnapshot(rows, null))
                .onErrorResume(e -> Mono.just(new LocksSnapshot(List.of(), e.toString())));
    }

    /** {@link #snapshot()} every {@link #PERIOD}, as Server-Sent Events ({@code event: locks}). */
    @GetMapping(path = "/locks/stream", produces = MediaType.TEXT_EVENT_STREAM_VALUE)
    Flux<ServerSentEvent<LocksSnapshot>> stream() {
        return Flux.interval(Duration.ZERO, PERIOD)
                .onBackpressureDrop()
                .concatMap(n -> snapshot(), 1)
                .map(s -> ServerSentEvent.builder(s).event("locks").build());
    }

    /**
     * Breaks a lock: {@link FencedLockClient#forceRelease(String, String)}, then tells the scenario if the lock was
     * its paused worker A's. 400 for a bad name or reason.
     */
    @PostMapping("/locks/force-release")
    Mono<ForceReleaseResult> forceRelease(@RequestBody ForceReleaseRequest request) {
        if (request.name() == null || request.reason() == null) {
            return Mono.error(new ResponseStatusException(HttpStatus.BAD_REQUEST, "name and reason are required"));
        }
        return locks.forceRelease(request.name(), request.reason()).doOnNext(stalled::broken);
    }
}
