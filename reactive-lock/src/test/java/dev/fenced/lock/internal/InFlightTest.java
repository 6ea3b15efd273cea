package dev.fenced.lock.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.test.StepVerifier;

/** Close waits for the lifecycle's commands in flight: idle completes once the last of them ends, never before. */
class InFlightTest {

    @Test
    void idleCompletesAtOnceWhenNothingIsInFlight() {
        StepVerifier.create(new InFlight().idle()).verifyComplete();
    }

    @Test
    void idleWaitsForEveryTrackedCommandAndCompletesWhenTheLastEnds() {
        InFlight inFlight = new InFlight();
        Sinks.One<String> first = Sinks.one();
        Sinks.One<String> second = Sinks.one();
        inFlight.track(first.asMono()).subscribe(v -> { }, e -> { });
        inFlight.track(second.asMono()).subscribe(v -> { }, e -> { });
        AtomicBoolean idle = new AtomicBoolean();
        inFlight.idle().subscribe(null, null, () -> idle.set(true));

        first.tryEmitValue("done");
        assertThat(idle).as("one command is still in flight").isFalse();
        second.tryEmitError(new IllegalStateException("failed"));
        assertThat(idle).as("the last command ended").isTrue();
    }

    @Test
    void aCommandCancelledCountsAsEndedAndACommandStartedLaterIsWaitedForByALaterIdle() {
        InFlight inFlight = new InFlight();
        inFlight.track(Mono.never()).subscribe().dispose();
        StepVerifier.create(inFlight.idle()).verifyComplete();

        Sinks.One<String> later = Sinks.one();
        inFlight.track(later.asMono()).subscribe(v -> { }, e -> { });
        StepVerifier.create(inFlight.idle())
                .expectSubscription()
                .then(() -> later.tryEmitValue("done"))
                .verifyComplete();
    }
}
