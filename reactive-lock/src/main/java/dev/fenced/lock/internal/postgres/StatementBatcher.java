package dev.fenced.lock.internal.postgres;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiFunction;
import java.util.function.Function;
import java.util.function.Predicate;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;

/**
 * Runs the lease statements of one kind (acquires, or releases) that wait at the same time as one multi-row
 * statement: a hundred acquires in flight cost PostgreSQL a few statements and commits instead of a hundred. The
 * policy is the Redis store's for its script calls, with one rule of its own: a statement that runs in a slot never
 * waits for a row lock.
 * <ul>
 *   <li>A request made while no statement of this kind runs leaves at once and alone, in the one-row statement,
 *       which may wait for its row (a lease check's transaction): one acquire at a time pays nothing, and is
 *       answered as without this class.</li>
 *   <li>Requests made while a statement of this kind runs wait for a slot: at most {@link #MAX_IN_FLIGHT}
 *       multi-row statements run at once. They leave together as soon as a slot frees: up to {@link #BATCH} a
 *       statement, more (an {@code MAX_IN_FLIGHT}-th of those waiting, up to {@link #MAX_BATCH}) when more wait;
 *       a lone request in a slot still goes in the multi-row statement. That statement waits for no row lock: it
 *       skips a row locked by someone else, and its request runs again alone ({@code replyRunAlone}), in the
 *       one-row statement that may wait, outside the slots. So a request that waits for a long write transaction
 *       holds up no request in the slots (before, four one-row statements waiting for rows held every slot, and
 *       every other request of the client queued behind them).</li>
 *   <li>At most {@link #MAX_ALONE} one-row statements of this kind run at once, the lone request's included, so
 *       that this kind never holds more than {@code MAX_IN_FLIGHT + MAX_ALONE} connections of the pool, however many
 *       requests wait for rows: a skipped request beyond them takes the {@code crowded} reply at once where there
 *       is one (an acquire: busy, its row being locked by someone else, with a short time to try again after:
 *       the lock may be free by then), or else waits for one of them to end.</li>
 *   <li>A statement carries each lock once (PostgreSQL refuses to change one row twice in a statement): a
 *       second request for a lock already in the statement waits for the next one, in its place.</li>
 *   <li>Each request gets its own reply: the statement answers for every row. A statement that fails as a whole
 *       fails every request it carried, each with the error classified for its own lock, except a statement
 *       rolled back by a wait ({@code retryAlone}: failed to serialize, a deadlock, or a wait past its bound):
 *       it changed nothing, and each request goes back to the head of the line to run alone, in a slot, in the
 *       multi-row statement; one rolled back again, alone, runs as a skipped request does. So one contended lock
 *       does not fail the others, and a rollback does not send every member to the pool at once.</li>
 *   <li>A request that has waited longer than the command timeout, since it was made, when a statement could take
 *       it (again) fails without being sent ({@link PostgresErrors.NotConnectedException}, "not sent": nothing it
 *       asked for took effect, no undo needed), or takes the {@code crowded} reply if it was skipped. A request can
 *       so take up to about twice the command timeout: its waits, then its last statement.</li>
 * </ul>
 * Cancelling a request before it leaves takes it back; after, its statement runs on (the lease runtime
 * subscribes to the store's replies itself and undoes what an abandoned attempt took). Thread-safe.
 *
 * @param <R> a request
 * @param <T> its reply
 */
final class StatementBatcher<R, T> {

    /** The most requests a statement carries while few wait. */
    static final int BATCH = 32;

    /** The most requests one statement carries. */
    static final int MAX_BATCH = 256;

    /** The most multi-row statements of one kind running at once: the slots. */
    static final int MAX_IN_FLIGHT = 4;

    /** The most one-row statements of one kind running at once, outside the slots. */
    static final int MAX_ALONE = 4;

    private final Function<R, Mono<T>> one;
    private final Function<List<R>, Mono<List<T>>> many;
    private final Function<R, String> key;
    private final Predicate<Throwable> retryAlone;
    private final Predicate<T> replyRunAlone;
    private final BiFunction<Throwable, R, Throwable> classify;
    private final @Nullable Function<R, T> crowded;
    private final Duration commandTimeout;
    private final long timeoutNanos;
    /** The requests waiting for a slot. Guarded by itself, as are {@link #aside}, {@link #running} and {@link #outside}. */
    private final ArrayDeque<Pending<R, T>> waiting = new ArrayDeque<>();
    /** The skipped requests waiting for a one-row statement. */
    private final ArrayDeque<Pending<R, T>> aside = new ArrayDeque<>();
    /** The multi-row statements running: one a slot. */
    private int running;
    /** The one-row statements running, outside the slots. */
    private int outside;
    private final AtomicInteger statements = new AtomicInteger();

    /**
     * @param one runs one request alone, its failure classified; it may wait for a row lock
     * @param many runs one or several requests (distinct keys) in one statement that waits for no row lock,
     *     replying in their order; its failure unclassified
     * @param key the lock a request concerns: a statement carries each once
     * @param retryAlone whether a failure of {@code many} changed nothing and its requests should be run alone
     * @param replyRunAlone whether a reply of {@code many} says that its request was skipped, to be run alone
     * @param classify a failure of {@code many} as the given request reports it
     * @param crowded the reply of a skipped request when {@link #MAX_ALONE} one-row statements run already, or
     *     {@code null} to wait for one of them to end
     * @param commandTimeout the command timeout
     */
    StatementBatcher(Function<R, Mono<T>> one, Function<List<R>, Mono<List<T>>> many, Function<R, String> key,
            Predicate<Throwable> retryAlone, Predicate<T> replyRunAlone, BiFunction<Throwable, R, Throwable> classify,
            @Nullable Function<R, T> crowded, Duration commandTimeout) {
        this.one = one;
        this.many = many;
        this.key = key;
        this.retryAlone = retryAlone;
        this.replyRunAlone = replyRunAlone;
        this.classify = classify;
        this.crowded = crowded;
        this.commandTimeout = commandTimeout;
        this.timeoutNanos = commandTimeout.toNanos();
    }

    /**
     * Sends a request, alone or with others. Cold: it waits for its statement once subscribed.
     *
     * @param request the request
     * @return its reply, or its own failure
     */
    Mono<T> send(R request) {
        return Mono.create(sink -> {
            Pending<R, T> pending = new Pending<>(request, sink, System.nanoTime(), new AtomicBoolean());
            sink.onCancel(() -> pending.cancelled.set(true));
            boolean alone;
            synchronized (waiting) {
                alone = running == 0 && outside == 0 && waiting.isEmpty() && aside.isEmpty();
                if (alone) {
                    outside++;
                } else {
                    waiting.addLast(pending);
                }
            }
            if (alone) {
                runOutside(pending);
            } else {
                drain();
            }
        });
    }

    /** How many statements of several requests this batcher has run: for tests and benchmarks. */
    int multiRowStatements() {
        return statements.get();
    }

    private void drain() {
        for (;;) {
            List<Pending<R, T>> batch;
            List<Pending<R, T>> expired = new ArrayList<>(0);
            synchronized (waiting) {
                if (running >= MAX_IN_FLIGHT || waiting.isEmpty()) {
                    return;
                }
                batch = take(expired);
                if (!batch.isEmpty()) {
                    running++;
                }
            }
            // Signalled outside the lock: a subscriber may send again at once.
            expired.forEach(late -> late.sink.error(notSent(late)));
            if (!batch.isEmpty()) {
                runTogether(batch);
            }
        }
    }

    /** The failure of a request that waited longer than the command timeout for a statement. */
    private Throwable notSent(Pending<R, T> late) {
        return classify.apply(new PostgresErrors.NotConnectedException("waited longer than the command timeout ("
                + commandTimeout.toMillis() + " ms) for one of the statements of its kind", null, true), late.request);
    }

    /** The next statement's requests, oldest first, one a lock; moves those that waited too long to {@code expired}. */
    private List<Pending<R, T>> take(List<Pending<R, T>> expired) {
        int size = Math.max(BATCH, Math.min(MAX_BATCH, (waiting.size() + MAX_IN_FLIGHT - 1) / MAX_IN_FLIGHT));
        List<Pending<R, T>> batch = new ArrayList<>(Math.min(size, waiting.size()));
        Set<String> keys = new HashSet<>();
        long now = System.nanoTime();
        for (Iterator<Pending<R, T>> it = waiting.iterator(); it.hasNext() && batch.size() < size;) {
            Pending<R, T> next = it.next();
            if (next.cancelled.get()) {
                it.remove();
            } else if (now - next.madeAt > timeoutNanos) {
                it.remove();
                expired.add(next);
            } else if (next.alone) {
                if (batch.isEmpty()) {
                    it.remove();
                    batch.add(next);
                    break;
                }
            } else if (keys.add(key.apply(next.request))) {
                it.remove();
                batch.add(next);
            }
        }
        return batch;
    }

    /** The requests in one multi-row statement, in a slot. */
    private void runTogether(List<Pending<R, T>> batch) {
        List<R> requests = new ArrayList<>(batch.size());
        for (Pending<R, T> pending : batch) {
            requests.add(pending.request);
        }
        if (batch.size() > 1) {
            statements.incrementAndGet();
        }
        subscribe(() -> many.apply(requests), (replies, error) -> {
            List<Pending<R, T>> skipped = new ArrayList<>(0);
            List<Runnable> answers = new ArrayList<>(batch.size());
            boolean again = false;
            if (error != null && retryAlone.test(error)) {
                if (batch.size() == 1) {
                    skipped.add(batch.get(0));
                } else {
                    again = true;
                }
            } else {
                Throwable failure = error;
                if (failure == null && (replies == null || replies.size() != batch.size())) {
                    failure = new IllegalStateException("a lease statement of " + batch.size() + " locks answered "
                            + (replies == null ? "nothing" : replies.size() + " replies"));
                }
                for (int i = 0; i < batch.size(); i++) {
                    Pending<R, T> pending = batch.get(i);
                    T reply = failure == null ? replies.get(i) : null;
                    if (reply != null && replyRunAlone.test(reply)) {
                        skipped.add(pending);
                    } else {
                        Throwable own = failure;
                        answers.add(() -> settle(pending, reply, own == null ? null : classify.apply(own, pending.request)));
                    }
                }
            }
            if (again) {
                synchronized (waiting) {
                    // Back to the head of the line, each to run alone in a multi-row statement, through the slots.
                    for (int i = batch.size() - 1; i >= 0; i--) {
                        Pending<R, T> pending = batch.get(i);
                        waiting.addFirst(new Pending<>(pending.request, pending.sink, pending.madeAt, pending.cancelled, true));
                    }
                }
            }
            try {
                // Answered while the slot is still taken: when the other slots are taken too (many in flight), the
                // requests the subscribers make at once queue up and leave together below, rather than the first of
                // them alone in this slot (about 20 % of the pairs/s at 64 in flight). The slot is held meanwhile by
                // what the subscribers run on this thread.
                answers.forEach(Runnable::run);
            } finally {
                synchronized (waiting) {
                    running--;
                }
                try {
                    skipped.forEach(this::runAside);
                } finally {
                    drain();
                }
            }
        });
    }

    /** A skipped request: alone in the one-row statement if fewer than {@link #MAX_ALONE} run, else crowded or aside. */
    private void runAside(Pending<R, T> pending) {
        boolean now;
        synchronized (waiting) {
            now = outside < MAX_ALONE;
            if (now) {
                outside++;
            } else if (crowded == null) {
                aside.addLast(pending);
            }
        }
        if (now) {
            runOutside(pending);
        } else if (crowded != null) {
            settle(pending, crowded.apply(pending.request), null);
        }
    }

    /**
     * One request in the one-row statement, outside the slots (counted in {@link #outside} by the caller); nothing
     * if it was cancelled meanwhile, and not sent if it has waited longer than the command timeout.
     */
    private void runOutside(Pending<R, T> pending) {
        if (pending.cancelled.get()) {
            ended();
            return;
        }
        if (System.nanoTime() - pending.madeAt > timeoutNanos) {
            ended();
            settleLate(pending);
            return;
        }
        subscribe(() -> one.apply(pending.request), (value, error) -> {
            ended();
            settle(pending, value, error);
        });
    }

    /** A one-row statement has ended: the next skipped request waiting for one, if any, takes its place. */
    private void ended() {
        Pending<R, T> next = null;
        List<Pending<R, T>> late = new ArrayList<>(0);
        synchronized (waiting) {
            outside--;
            while (next == null && !aside.isEmpty()) {
                Pending<R, T> first = aside.pollFirst();
                if (first.cancelled.get()) {
                    continue;
                }
                if (System.nanoTime() - first.madeAt > timeoutNanos) {
                    late.add(first);
                } else {
                    next = first;
                    outside++;
                }
            }
        }
        late.forEach(this::settleLate);
        if (next != null) {
            runOutside(next);
        }
    }

    /** A skipped request that has waited too long to run alone: the crowded reply, or not sent. */
    private void settleLate(Pending<R, T> pending) {
        if (crowded != null) {
            settle(pending, crowded.apply(pending.request), null);
        } else {
            pending.sink.error(notSent(pending));
        }
    }

    private static <R, T> void settle(Pending<R, T> pending, @Nullable T value, @Nullable Throwable error) {
        if (error != null) {
            pending.sink.error(error);
        } else if (value != null) {
            pending.sink.success(value);
        } else {
            pending.sink.success();
        }
    }

    /** Subscribes to a statement and hands its outcome (value, error, or neither) to {@code outcome} exactly once. */
    private static <X> void subscribe(java.util.function.Supplier<Mono<X>> statement,
            java.util.function.BiConsumer<@Nullable X, @Nullable Throwable> outcome) {
        Mono<X> reply;
        try {
            reply = statement.get();
        } catch (Throwable e) {
            reactor.core.Exceptions.throwIfJvmFatal(e);
            reply = Mono.error(e);
        }
        AtomicBoolean answered = new AtomicBoolean();
        reply.subscribe(value -> {
            if (answered.compareAndSet(false, true)) {
                outcome.accept(value, null);
            }
        }, error -> {
            if (answered.compareAndSet(false, true)) {
                outcome.accept(null, error);
            }
        }, () -> {
            if (answered.compareAndSet(false, true)) {
                outcome.accept(null, null);
            }
        });
    }

    /**
     * A request in line, with when it was made; {@code alone}: to run in a statement of its own (its shared statement
     * was rolled back).
     */
    private record Pending<R, T>(R request, MonoSink<T> sink, long madeAt, AtomicBoolean cancelled, boolean alone) {

        Pending(R request, MonoSink<T> sink, long madeAt, AtomicBoolean cancelled) {
            this(request, sink, madeAt, cancelled, false);
        }
    }
}
