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
 * policy is the Redis store's for its script calls:
 * <ul>
 *   <li>At most {@link #MAX_IN_FLIGHT} statements of this kind run at once, each on a connection of the
 *       application's pool (fewer connections than one statement a request takes); requests made meanwhile
 *       wait, and leave together as soon as a statement answers: up to {@link #BATCH} a statement, more (an
 *       {@code MAX_IN_FLIGHT}-th of those waiting, up to {@link #MAX_BATCH}) when more wait. Below that bound a
 *       request leaves at once and alone, in today's one-row statement: one acquire at a time pays nothing.</li>
 *   <li>A statement carries each lock once (PostgreSQL refuses to change one row twice in a statement): a
 *       second request for a lock already in the statement waits for the next one, in its place.</li>
 *   <li>Each request gets its own reply: the statement answers for every row. A statement that fails as a whole
 *       fails every request it carried, each with the error classified for its own lock, except a statement
 *       rolled back by a wait for one lock ({@code retryAlone}): it changed nothing, and each request goes back
 *       to the head of the line to run again alone, so that one contended lock does not fail the others; those
 *       reruns take the slots like any statement (at most {@link #MAX_IN_FLIGHT} at once), each with a new
 *       command timeout to wait for one. So does a request whose reply says the statement skipped it
 *       ({@code replyRunAlone}: its lock's row was locked by someone else).</li>
 *   <li>A request that has waited longer than the command timeout when a statement could take it fails without
 *       being sent ({@link PostgresErrors.NotConnectedException}, "not sent": nothing ran, no undo needed). A
 *       request can so take up to about twice the command timeout: its wait for a slot, then its statement.</li>
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

    /** The most statements of one kind running at once, and so the most connections they hold. */
    static final int MAX_IN_FLIGHT = 4;

    private final Function<R, Mono<T>> one;
    private final Function<List<R>, Mono<List<T>>> many;
    private final Function<R, String> key;
    private final Predicate<Throwable> retryAlone;
    private final Predicate<T> replyRunAlone;
    private final BiFunction<Throwable, R, Throwable> classify;
    private final Duration commandTimeout;
    private final long timeoutNanos;
    /** Guarded by itself, as is {@link #running}. */
    private final ArrayDeque<Pending<R, T>> waiting = new ArrayDeque<>();
    private int running;
    private final AtomicInteger statements = new AtomicInteger();

    /**
     * @param one runs one request alone, its failure classified
     * @param many runs several requests (distinct keys) in one statement, replying in their order; its failure
     *     unclassified
     * @param key the lock a request concerns: a statement carries each once
     * @param retryAlone whether a failure of {@code many} changed nothing and its requests should be run alone
     * @param replyRunAlone whether a reply of {@code many} says that its request was skipped, to be run alone
     * @param classify a failure of {@code many} as the given request reports it
     * @param commandTimeout the command timeout
     */
    StatementBatcher(Function<R, Mono<T>> one, Function<List<R>, Mono<List<T>>> many, Function<R, String> key,
            Predicate<Throwable> retryAlone, Predicate<T> replyRunAlone, BiFunction<Throwable, R, Throwable> classify,
            Duration commandTimeout) {
        this.one = one;
        this.many = many;
        this.key = key;
        this.retryAlone = retryAlone;
        this.replyRunAlone = replyRunAlone;
        this.classify = classify;
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
            Pending<R, T> pending = new Pending<>(request, sink, System.nanoTime(), new AtomicBoolean(), false);
            sink.onCancel(() -> pending.cancelled.set(true));
            synchronized (waiting) {
                waiting.addLast(pending);
            }
            drain();
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
            for (Pending<R, T> late : expired) {
                late.sink.error(classify.apply(new PostgresErrors.NotConnectedException("waited longer than the command timeout ("
                        + commandTimeout.toMillis() + " ms) for one of the " + MAX_IN_FLIGHT + " statements of its kind", null,
                        true), late.request));
            }
            if (batch.isEmpty()) {
                continue;
            }
            if (batch.size() == 1) {
                runAlone(batch);
            } else {
                runTogether(batch);
            }
        }
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
            } else if (now - next.queuedAt > timeoutNanos) {
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

    /** Each request in a statement of its own; together they count as one statement running until all answer. */
    private void runAlone(List<Pending<R, T>> batch) {
        AtomicInteger unanswered = new AtomicInteger(batch.size());
        for (Pending<R, T> pending : batch) {
            subscribe(() -> one.apply(pending.request), (value, error) -> {
                try {
                    settle(pending, value, error);
                } finally {
                    if (unanswered.decrementAndGet() == 0) {
                        finished();
                    }
                }
            });
        }
    }

    private void runTogether(List<Pending<R, T>> batch) {
        List<R> requests = new ArrayList<>(batch.size());
        for (Pending<R, T> pending : batch) {
            requests.add(pending.request);
        }
        statements.incrementAndGet();
        subscribe(() -> many.apply(requests), (replies, error) -> {
            if (error != null && retryAlone.test(error)) {
                runAgainAlone(batch);
                finished();
                return;
            }
            List<Pending<R, T>> skipped = new ArrayList<>(0);
            try {
                if (error == null && (replies == null || replies.size() != batch.size())) {
                    error = new IllegalStateException("a lease statement of " + batch.size() + " locks answered "
                            + (replies == null ? "nothing" : replies.size() + " replies"));
                }
                for (int i = 0; i < batch.size(); i++) {
                    Pending<R, T> pending = batch.get(i);
                    T reply = error == null && replies != null ? replies.get(i) : null;
                    if (reply != null && replyRunAlone.test(reply)) {
                        skipped.add(pending);
                    } else {
                        settle(pending, reply, error == null ? null : classify.apply(error, pending.request));
                    }
                }
            } finally {
                runAgainAlone(skipped);
                finished();
            }
        });
    }

    /** Back to the head of the line, each to run alone, through the slots like any other statement. */
    private void runAgainAlone(List<Pending<R, T>> batch) {
        long now = System.nanoTime();
        synchronized (waiting) {
            for (int i = batch.size() - 1; i >= 0; i--) {
                Pending<R, T> pending = batch.get(i);
                waiting.addFirst(new Pending<>(pending.request, pending.sink, now, pending.cancelled, true));
            }
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
        } catch (RuntimeException e) {
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

    private void finished() {
        synchronized (waiting) {
            running--;
        }
        drain();
    }

    /** A request in line; {@code alone}: to run in a statement of its own (its shared statement was rolled back). */
    private record Pending<R, T>(R request, MonoSink<T> sink, long queuedAt, AtomicBoolean cancelled, boolean alone) {
    }
}
