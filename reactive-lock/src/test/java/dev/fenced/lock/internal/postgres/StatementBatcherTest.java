package dev.fenced.lock.internal.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.LockServiceException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * {@link StatementBatcher} with statements of its own: each one-row statement answers when the test lets it, every
 * multi-row statement fails as rolled back by a wait.
 */
class StatementBatcherTest {

    /** The failure of a multi-row statement that changed nothing: its requests run again alone. */
    private static final class RolledBack extends RuntimeException {
        private static final long serialVersionUID = 1L;

        RolledBack() {
            super("rolled back by a wait", null, false, false);
        }
    }

    private final AtomicInteger running = new AtomicInteger();
    private final AtomicInteger peak = new AtomicInteger();
    private final Map<String, Sinks.One<String>> open = new ConcurrentHashMap<>();
    private final List<String> ranAlone = new CopyOnWriteArrayList<>();

    private StatementBatcher<String, String> batcher(Duration commandTimeout) {
        return new StatementBatcher<>(r -> {
            Sinks.One<String> reply = Sinks.one();
            open.put(r, reply);
            ranAlone.add(r);
            peak.accumulateAndGet(running.incrementAndGet(), Math::max);
            return reply.asMono();
        }, rs -> Mono.error(new RolledBack()), r -> r, RolledBack.class::isInstance, reply -> false,
                (e, r) -> PostgresErrors.classify(e, r, "acquire", commandTimeout, "t"), commandTimeout);
    }

    /** Fills every slot with a one-row statement that waits, then queues {@code queued} requests behind them. */
    private List<AtomicReference<Object>> fillSlotsAndQueue(StatementBatcher<String, String> batcher, int queued) {
        List<AtomicReference<Object>> outcomes = new ArrayList<>();
        for (int i = 0; i < StatementBatcher.MAX_IN_FLIGHT + queued; i++) {
            AtomicReference<Object> outcome = new AtomicReference<>();
            batcher.send("r" + i).subscribe(outcome::set, outcome::set);
            outcomes.add(outcome);
        }
        assertThat(ranAlone).as("requests sent at once").hasSize(StatementBatcher.MAX_IN_FLIGHT);
        return outcomes;
    }

    /** The one-row statement of {@code request} answers: it no longer runs from then on. */
    private void answer(String request) {
        running.decrementAndGet();
        open.remove(request).tryEmitValue(request);
    }

    @Test
    void membersOfAStatementRolledBackByAWaitRunAloneThroughTheSlots() {
        StatementBatcher<String, String> batcher = batcher(Duration.ofMinutes(1));
        List<AtomicReference<Object>> outcomes = fillSlotsAndQueue(batcher, 10);
        // A slot frees: the 10 queued leave in one statement, which is rolled back, and are run again alone.
        answer("r0");
        assertThat(batcher.multiRowStatements()).isEqualTo(1);
        while (!open.isEmpty()) {
            assertThat(running.get()).as("statements running at once").isLessThanOrEqualTo(StatementBatcher.MAX_IN_FLIGHT);
            answer(open.keySet().iterator().next());
        }
        assertThat(peak.get()).as("most statements at once").isLessThanOrEqualTo(StatementBatcher.MAX_IN_FLIGHT);
        assertThat(ranAlone).as("requests run alone").hasSize(14);
        for (int i = 0; i < outcomes.size(); i++) {
            assertThat(outcomes.get(i).get()).as("reply of r" + i).isEqualTo("r" + i);
        }
    }

    @Test
    void aRequestThatWaitedTooLongForASlotFailsAsNotSentNotAsNotConnected() throws InterruptedException {
        StatementBatcher<String, String> batcher = batcher(Duration.ofMillis(50));
        List<AtomicReference<Object>> outcomes = fillSlotsAndQueue(batcher, 1);
        Thread.sleep(200); // longer than the command timeout: the queued request has waited too long
        answer(open.keySet().iterator().next());
        List<Object> failures = outcomes.stream().map(AtomicReference::get).filter(Throwable.class::isInstance).toList();
        assertThat(failures).as("requests failed").hasSize(1);
        Throwable failure = (Throwable) failures.get(0);
        assertThat(failure).isInstanceOf(LockServiceException.class);
        assertThat(failure.getMessage()).contains("not sent").contains("waited longer than the command timeout")
                .doesNotContain("cannot connect");
        assertThat(PostgresErrors.neverSent(failure)).as("never sent").isTrue();
    }
}
