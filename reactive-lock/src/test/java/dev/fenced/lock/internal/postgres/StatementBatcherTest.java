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
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * {@link StatementBatcher} with statements of its own: each one-row statement answers when the test lets it; what a
 * multi-row statement does is up to each test.
 */
class StatementBatcherTest {

    /** The failure of a multi-row statement that changed nothing: its requests run again alone. */
    private static final class RolledBack extends RuntimeException {
        private static final long serialVersionUID = 1L;

        RolledBack() {
            super("rolled back by a wait", null, false, false);
        }
    }

    /** The reply of a multi-row statement for a request whose row it skipped. */
    private static final String SKIPPED = "skipped";

    private final Map<String, Sinks.One<String>> open = new ConcurrentHashMap<>();
    private final List<String> ranAlone = new CopyOnWriteArrayList<>();
    private final List<List<String>> ranTogether = new CopyOnWriteArrayList<>();
    private final AtomicInteger slotsRunning = new AtomicInteger();
    private final AtomicInteger slotsPeak = new AtomicInteger();

    /**
     * A batcher whose one-row statements wait for the test, and whose multi-row statements do what {@code many} says
     * (counted while they run in {@link #slotsRunning}).
     */
    private StatementBatcher<String, String> batcher(Duration commandTimeout, Function<List<String>, Mono<List<String>>> many) {
        return batcher(commandTimeout, many, null);
    }

    /** {@link #batcher(Duration, Function)} whose skipped requests beyond the one-row limit take {@code crowded}. */
    private StatementBatcher<String, String> batcher(Duration commandTimeout, Function<List<String>, Mono<List<String>>> many,
            Function<String, String> crowded) {
        return new StatementBatcher<>(r -> {
            Sinks.One<String> reply = Sinks.one();
            open.put(r, reply);
            ranAlone.add(r);
            return reply.asMono();
        }, rs -> {
            ranTogether.add(List.copyOf(rs));
            slotsPeak.accumulateAndGet(slotsRunning.incrementAndGet(), Math::max);
            // Counted out before the batcher hears the outcome (it may start the next statement at once).
            return many.apply(rs).doOnSuccess(v -> slotsRunning.decrementAndGet()).doOnError(e -> slotsRunning.decrementAndGet());
        }, r -> r, RolledBack.class::isInstance, SKIPPED::equals,
                (e, r) -> PostgresErrors.classify(e, r, "acquire", commandTimeout, "t"), crowded, commandTimeout);
    }

    /** Multi-row statements that answer each request with its own name at once. */
    private static Mono<List<String>> answerAll(List<String> requests) {
        return Mono.just(List.copyOf(requests));
    }

    /** The one-row statement of {@code request} answers. */
    private void answer(String request) {
        open.remove(request).tryEmitValue(request);
    }

    private static AtomicReference<Object> send(StatementBatcher<String, String> batcher, String request) {
        AtomicReference<Object> outcome = new AtomicReference<>();
        batcher.send(request).subscribe(outcome::set, outcome::set);
        return outcome;
    }

    @Test
    void aRequestWhileNothingRunsGoesAloneAndOneThatWaitsHoldsUpNoOtherRequest() {
        StatementBatcher<String, String> batcher = batcher(Duration.ofMinutes(1), StatementBatcherTest::answerAll);
        AtomicReference<Object> first = send(batcher, "r0");
        assertThat(ranAlone).as("the lone request, in the one-row statement").containsExactly("r0");
        // r0 waits (for a write transaction, say): later requests go through the slots and are answered meanwhile.
        for (int i = 1; i <= 3 * StatementBatcher.MAX_IN_FLIGHT; i++) {
            assertThat(send(batcher, "r" + i).get()).as("reply of r" + i).isEqualTo("r" + i);
        }
        assertThat(first.get()).as("r0, still waiting").isNull();
        assertThat(ranAlone).containsExactly("r0");
        answer("r0");
        assertThat(first.get()).isEqualTo("r0");
        // Nothing runs any more: the next request goes alone again.
        send(batcher, "r-last");
        assertThat(ranAlone).containsExactly("r0", "r-last");
    }

    @Test
    void skippedRequestsRunAloneOutsideTheSlotsAtMostMaxAloneAtOnce() {
        StatementBatcher<String, String> batcher = batcher(Duration.ofMinutes(1),
                rs -> Mono.just(rs.stream().map(r -> r.startsWith("locked") ? SKIPPED : r).toList()));
        send(batcher, "lone");
        List<AtomicReference<Object>> locked = new ArrayList<>();
        for (int i = 0; i < 2 * StatementBatcher.MAX_ALONE; i++) {
            locked.add(send(batcher, "locked-" + i));
        }
        // The lone request and the first skipped ones wait alone for their rows, outside the slots; the other
        // skipped ones wait for them to end. A free lock is still answered at once.
        assertThat(ranAlone).hasSize(StatementBatcher.MAX_ALONE);
        assertThat(send(batcher, "free").get()).isEqualTo("free");
        assertThat(locked).allMatch(outcome -> outcome.get() == null);
        answer("lone");
        while (!open.isEmpty()) {
            assertThat(open).as("one-row statements at once").hasSizeLessThanOrEqualTo(StatementBatcher.MAX_ALONE);
            answer(open.keySet().iterator().next());
        }
        for (int i = 0; i < locked.size(); i++) {
            assertThat(locked.get(i).get()).isEqualTo("locked-" + i);
        }
        assertThat(ranAlone).hasSize(1 + 2 * StatementBatcher.MAX_ALONE);
    }

    @Test
    void skippedRequestsBeyondMaxAloneTakeTheCrowdedReplyAtOnce() {
        StatementBatcher<String, String> batcher = batcher(Duration.ofMinutes(1),
                rs -> Mono.just(rs.stream().map(r -> r.startsWith("locked") ? SKIPPED : r).toList()), r -> "busy " + r);
        send(batcher, "lone");
        List<AtomicReference<Object>> locked = new ArrayList<>();
        for (int i = 0; i < 2 * StatementBatcher.MAX_ALONE; i++) {
            locked.add(send(batcher, "locked-" + i));
        }
        assertThat(ranAlone).hasSize(StatementBatcher.MAX_ALONE);
        for (int i = 0; i < locked.size(); i++) {
            assertThat(locked.get(i).get()).as("reply of locked-" + i)
                    .isEqualTo(i < StatementBatcher.MAX_ALONE - 1 ? null : "busy locked-" + i);
        }
    }

    @Test
    void membersOfAStatementRolledBackByAWaitRunAloneThroughTheSlotsThenOutside() {
        // Every multi-row statement waits until the test answers it, and is then rolled back.
        List<Sinks.Empty<Void>> statements = new CopyOnWriteArrayList<>();
        StatementBatcher<String, String> batcher = batcher(Duration.ofMinutes(1), rs -> {
            Sinks.Empty<Void> done = Sinks.empty();
            statements.add(done);
            return done.asMono().then(Mono.error(new RolledBack()));
        });
        send(batcher, "lone");
        List<AtomicReference<Object>> outcomes = new ArrayList<>();
        for (int i = 0; i < StatementBatcher.MAX_IN_FLIGHT + 10; i++) {
            outcomes.add(send(batcher, "r" + i));
        }
        assertThat(ranTogether).as("one a slot, the rest queued").hasSize(StatementBatcher.MAX_IN_FLIGHT);
        // Roll back statement after statement: the 10 queued leave together, are rolled back, and run again one a
        // statement through the slots; rolled back again, each runs alone in the one-row statement.
        for (int i = 0; i < statements.size(); i++) {
            statements.get(i).tryEmitEmpty();
            assertThat(slotsRunning.get()).isLessThanOrEqualTo(StatementBatcher.MAX_IN_FLIGHT);
        }
        while (!open.isEmpty()) {
            assertThat(open).as("one-row statements at once").hasSizeLessThanOrEqualTo(StatementBatcher.MAX_ALONE);
            answer(open.keySet().iterator().next());
        }
        assertThat(slotsPeak.get()).as("most multi-row statements at once").isLessThanOrEqualTo(StatementBatcher.MAX_IN_FLIGHT);
        assertThat(ranTogether).as("statements of several requests").filteredOn(rs -> rs.size() > 1).hasSize(1);
        assertThat(batcher.multiRowStatements()).isEqualTo(1);
        assertThat(ranAlone).as("requests run alone in the end").hasSize(1 + StatementBatcher.MAX_IN_FLIGHT + 10);
        for (int i = 0; i < outcomes.size(); i++) {
            assertThat(outcomes.get(i).get()).as("reply of r" + i).isEqualTo("r" + i);
        }
    }

    @Test
    void aRequestThatWaitedTooLongForASlotFailsAsNotSentNotAsNotConnected() throws InterruptedException {
        // Multi-row statements that answer when the test lets them: the slots stay taken until then.
        List<Sinks.Empty<Void>> statements = new CopyOnWriteArrayList<>();
        StatementBatcher<String, String> batcher = batcher(Duration.ofMillis(50), rs -> {
            Sinks.Empty<Void> done = Sinks.empty();
            statements.add(done);
            return done.asMono().then(answerAll(rs));
        });
        send(batcher, "lone");
        List<AtomicReference<Object>> outcomes = new ArrayList<>();
        for (int i = 0; i <= StatementBatcher.MAX_IN_FLIGHT; i++) {
            outcomes.add(send(batcher, "r" + i));
        }
        Thread.sleep(200); // longer than the command timeout: the queued request has waited too long
        statements.get(0).tryEmitEmpty();
        List<Object> failures = outcomes.stream().map(AtomicReference::get).filter(Throwable.class::isInstance).toList();
        assertThat(failures).as("requests failed").hasSize(1);
        Throwable failure = (Throwable) failures.get(0);
        assertThat(failure).isInstanceOf(LockServiceException.class);
        assertThat(failure.getMessage()).contains("not sent").contains("waited longer than the command timeout")
                .doesNotContain("cannot connect");
        assertThat(PostgresErrors.neverSent(failure)).as("never sent").isTrue();
        assertThat(statements).as("no statement took the late request").hasSize(StatementBatcher.MAX_IN_FLIGHT);
    }
}
