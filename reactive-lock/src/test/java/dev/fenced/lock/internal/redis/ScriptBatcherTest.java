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

/** When the batcher sends, and how each request gets its own answer. */
class ScriptBatcherTest {

    private final List<List<String>> calls = new CopyOnWriteArrayList<>();
    private final DefaultEventLoop loop = new DefaultEventLoop();
    private final DefaultEventExecutor blockingHandlers = new DefaultEventExecutor();

    /** Answers each request with its upper-case form; a request named "bad" gets an error of its own. */
    private final ScriptBatcher<String, String> batcher = new ScriptBatcher<>(
            request -> {
                calls.add(List.of(request));
                return Mono.just(request.toUpperCase(java.util.Locale.ROOT));
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
        loop.submit(() -> {
            for (int i = 0; i < 10; i++) {
                batcher.send("r" + i).subscribe(replies::add);
            }
            assertThat(calls).as("nothing leaves during the turn").isEmpty();
        }).get(5, TimeUnit.SECONDS);
        loop.submit(() -> { }).get(5, TimeUnit.SECONDS);
        assertThat(calls).hasSize(1);
        assertThat(calls.get(0)).hasSize(10);
        assertThat(replies).containsExactlyInAnyOrder("R0", "R1", "R2", "R3", "R4", "R5", "R6", "R7", "R8", "R9");
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
