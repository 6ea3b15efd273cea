package dev.fenced.lock.internal.redis;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.channel.DefaultEventLoop;
import io.netty.util.concurrent.DefaultEventExecutor;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/** When the batcher sends, and how each request gets its own answer. */
class ScriptBatcherTest {

    private final List<List<String>> calls = new CopyOnWriteArrayList<>();
    private final DefaultEventLoop loop = new DefaultEventLoop();
    private final DefaultEventExecutor blockingHandlers = new DefaultEventExecutor();
    /** Holds the reply to a request named "held" until the test lets it go. */
    private final Sinks.Empty<Void> heldReply = Sinks.empty();

    /** Answers each request with its upper-case form; a request named "bad" gets an error of its own. */
    private final ScriptBatcher<String, String> batcher = new ScriptBatcher<>(
            request -> {
                calls.add(List.of(request));
                Mono<String> reply = Mono.just(request.toUpperCase(java.util.Locale.ROOT));
                return request.equals("held") ? heldReply.asMono().then(reply) : reply;
            },
            requests -> {
                calls.add(List.copyOf(requests));
                List<ScriptBatcher.Reply<String>> replies = new ArrayList<>();
                for (String r : requests) {
                    replies.add(r.equals("bad") ? ScriptBatcher.Reply.failed(new IllegalStateException("bad key"))
                            : ScriptBatcher.Reply.of(r.toUpperCase(java.util.Locale.ROOT)));
                }
                return Mono.just(replies);
            },
            (error, request) -> new IllegalArgumentException(request + ": " + error.getMessage(), error),
            Duration.ofSeconds(5));

    @AfterEach
    void stop() {
        loop.shutdownGracefully(0, 1, TimeUnit.SECONDS);
        blockingHandlers.shutdownGracefully(0, 1, TimeUnit.SECONDS);
    }

    @Test
    void requestsMadeDuringOneTurnOfAnEventLoopLeaveTogetherAtItsEnd() throws Exception {
        List<String> replies = new CopyOnWriteArrayList<>();
        batcher.send("held").subscribe(replies::add); // unanswered while the turn runs
        calls.clear();
        loop.submit(() -> {
            for (int i = 0; i < 10; i++) {
                batcher.send("r" + i).subscribe(replies::add);
            }
            assertThat(calls).as("nothing leaves during the turn").isEmpty();
        }).get(5, TimeUnit.SECONDS);
        loop.submit(() -> { }).get(5, TimeUnit.SECONDS);
        assertThat(calls).hasSize(1);
        assertThat(calls.get(0)).hasSize(10);
        heldReply.tryEmitEmpty();
        assertThat(replies).containsExactlyInAnyOrder("R0", "R1", "R2", "R3", "R4", "R5", "R6", "R7", "R8", "R9", "HELD");
    }

    @Test
    void theOnlyUnansweredRequestLeavesAtOnceEvenOnAnEventLoop() throws Exception {
        // One request at a time (a release made in its acquire's reply callback) must not wait for the end of the turn.
        List<String> replies = new CopyOnWriteArrayList<>();
        List<List<String>> sentDuringTheTurn = loop.submit(() -> {
            batcher.send("a").subscribe(replies::add);
            return List.copyOf(calls);
        }).get(5, TimeUnit.SECONDS);
        assertThat(sentDuringTheTurn).containsExactly(List.of("a"));
        assertThat(replies).containsExactly("A");
    }

    @Test
    void acquiresAndReleasesOfOneStoreCountTogether() throws Exception {
        // A release made while an acquire of the same store is unanswered is not alone: it waits for the turn's end.
        java.util.concurrent.atomic.AtomicInteger shared = new java.util.concurrent.atomic.AtomicInteger();
        ScriptBatcher<String, String> acquires = new ScriptBatcher<>(r -> {
            calls.add(List.of(r));
            return heldReply.asMono().then(Mono.just(r));
        }, rs -> Mono.error(new IllegalStateException("not batched")), (e, r) -> e, Duration.ofSeconds(5), shared);
        ScriptBatcher<String, String> releases = new ScriptBatcher<>(r -> {
            calls.add(List.of(r));
            return Mono.just(r);
        }, rs -> Mono.error(new IllegalStateException("not batched")), (e, r) -> e, Duration.ofSeconds(5), shared);
        acquires.send("acquire").subscribe();
        List<List<String>> sentDuringTheTurn = loop.submit(() -> {
            releases.send("release").subscribe();
            return List.copyOf(calls);
        }).get(5, TimeUnit.SECONDS);
        assertThat(sentDuringTheTurn).containsExactly(List.of("acquire"));
        loop.submit(() -> { }).get(5, TimeUnit.SECONDS);
        assertThat(calls).containsExactly(List.of("acquire"), List.of("release"));
        heldReply.tryEmitEmpty();
    }

    @Test
    void aRequestMadeOnAnExecutorThatIsNotAnIoLoopLeavesAtOnce() throws Exception {
        // A blocking-handler thread may block on the reply: the request must not wait for the end of its turn.
        String reply = blockingHandlers.submit(() -> batcher.send("a").block(Duration.ofSeconds(5))).get(10, TimeUnit.SECONDS);
        assertThat(reply).isEqualTo("A");
    }

    @Test
    void anErrorForOneRequestFailsThatRequestAlone() throws Exception {
        List<Object> outcomes = new CopyOnWriteArrayList<>();
        batcher.send("held").subscribe(); // unanswered while the turn runs: its requests leave together
        calls.clear();
        loop.submit(() -> {
            for (String r : List.of("a", "bad", "c")) {
                batcher.send(r).subscribe(outcomes::add, outcomes::add);
            }
        }).get(5, TimeUnit.SECONDS);
        loop.submit(() -> { }).get(5, TimeUnit.SECONDS);
        assertThat(calls).hasSize(1);
        assertThat(outcomes).hasSize(3).contains("A", "C");
        assertThat(outcomes).filteredOn(Throwable.class::isInstance).singleElement()
                .satisfies(e -> assertThat((Throwable) e).isInstanceOf(IllegalArgumentException.class).hasMessage("bad: bad key"));
    }

    @Test
    void requestsBeyondTheCallsInFlightWaitAndLeaveTogether() {
        List<String> replies = Flux.range(0, 200)
                .flatMap(i -> batcher.send("r" + i), 200)
                .collectList()
                .block(Duration.ofSeconds(10));
        assertThat(replies).hasSize(200);
        assertThat(calls.stream().mapToInt(List::size).sum()).isEqualTo(200);
    }
}
