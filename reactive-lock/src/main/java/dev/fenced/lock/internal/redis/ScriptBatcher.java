package dev.fenced.lock.internal.redis;

import io.netty.util.concurrent.EventExecutor;
import io.netty.util.internal.ThreadExecutorMap;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiFunction;
import java.util.function.BooleanSupplier;
import java.util.function.Function;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;

/**
 * Sends the lock commands of one kind (acquires, or releases) that wait at the same time as one script call: the
 * script takes a list of locks and answers for each, so a hundred acquires in flight cost Redis a few script calls
 * instead of a hundred. Each request keeps its own reply, or its own failure: a failed call fails every request it
 * carried, each with its own lock's name.
 *
 * <p>When to send:
 * <ul>
 *   <li>At most {@link #MAX_IN_FLIGHT} calls of this kind are in flight; requests made meanwhile wait, and leave
 *       together, up to {@link #MAX_BATCH} a call, as soon as a call answers. Below that bound a request made off
 *       an event loop leaves at once: one acquire at a time pays nothing for batching.</li>
 *   <li>A request made on a Netty event-loop thread (the callbacks of Lettuce's replies run there) leaves at the
 *       end of that loop's current turn, with every other request the turn made: the replies that one read decodes
 *       answer many requests, whose next commands go out as one call.</li>
 * </ul>
 *
 * <p>Cancelling a request's Mono does not recall it (Lettuce cannot recall a command either): the lease runtime
 * subscribes to the store's replies itself and undoes what an abandoned attempt took. Thread-safe.
 *
 * @param <R> a request
 * @param <T> its reply
 */
final class ScriptBatcher<R, T> {

    /**
     * The most requests one call carries. Small enough that 64 requests in flight make several calls, which
     * overlap: while Redis runs one, the client handles the replies of another (one call of 64 leaves both sides
     * idle in turn, and ran slower than one call per request); large enough that a call's own cost is shared.
     */
    static final int MAX_BATCH = 16;

    /** The most calls of one kind in flight at once; more requests wait for one of them to answer. */
    static final int MAX_IN_FLIGHT = 8;

    private final Function<R, Mono<T>> one;
    private final Function<List<R>, Mono<List<T>>> many;
    private final BiFunction<Throwable, R, Throwable> classify;
    private final BooleanSupplier canBatch;
    private final Queue<Pending<R, T>> waiting = new ConcurrentLinkedQueue<>();
    private final AtomicInteger inFlight = new AtomicInteger();
    private final AtomicBoolean drainScheduled = new AtomicBoolean();

    /**
     * @param one sends one request alone (the path of a request while the connection is not open, too)
     * @param many sends several requests in one call; replies in the requests' order, failures unclassified
     * @param classify a failure of a call of {@code many}, as the given request reports it
     * @param canBatch whether {@code many} can be used now (the connection is open)
     */
    ScriptBatcher(Function<R, Mono<T>> one, Function<List<R>, Mono<List<T>>> many,
            BiFunction<Throwable, R, Throwable> classify, BooleanSupplier canBatch) {
        this.one = one;
        this.many = many;
        this.classify = classify;
        this.canBatch = canBatch;
    }

    /**
     * Sends a request, alone or with others. Cold: the request waits for its call once subscribed.
     *
     * @param request the request
     * @return its reply
     */
    Mono<T> send(R request) {
        return Mono.create(sink -> {
            waiting.offer(new Pending<>(request, sink));
            wake();
        });
    }

    private void wake() {
        EventExecutor loop = ThreadExecutorMap.currentExecutor();
        if (loop != null) {
            if (drainScheduled.compareAndSet(false, true)) {
                try {
                    loop.execute(this::scheduledDrain);
                    return;
                } catch (RejectedExecutionException shuttingDown) {
                    drainScheduled.set(false);
                }
            } else {
                return; // a drain at the end of this turn will take the request
            }
        }
        drain();
    }

    private void scheduledDrain() {
        drainScheduled.set(false);
        drain();
    }

    private void drain() {
        for (;;) {
            int calls = inFlight.get();
            if (calls >= MAX_IN_FLIGHT || waiting.isEmpty()) {
                return;
            }
            if (!inFlight.compareAndSet(calls, calls + 1)) {
                continue;
            }
            List<Pending<R, T>> batch = new ArrayList<>();
            Pending<R, T> next;
            while (batch.size() < MAX_BATCH && (next = waiting.poll()) != null) {
                batch.add(next);
            }
            if (batch.isEmpty()) {
                // Another drain took them; look again, as a request may have come after the check.
                inFlight.decrementAndGet();
                continue;
            }
            if (batch.size() == 1 || !canBatch.getAsBoolean()) {
                sendAlone(batch);
            } else {
                sendTogether(batch);
            }
        }
    }

    /** Each request of the batch in a call of its own; the batch counts as one call in flight until all answer. */
    private void sendAlone(List<Pending<R, T>> batch) {
        AtomicInteger unanswered = new AtomicInteger(batch.size());
        for (Pending<R, T> pending : batch) {
            Mono<T> reply;
            try {
                reply = one.apply(pending.request);
            } catch (RuntimeException e) {
                reply = Mono.error(e);
            }
            reply.subscribe(pending.sink::success, e -> {
                pending.sink.error(e);
                answered(unanswered);
            }, () -> {
                pending.sink.success(); // after a value, a no-op
                answered(unanswered);
            });
        }
    }

    private void answered(AtomicInteger unanswered) {
        if (unanswered.decrementAndGet() == 0) {
            finished();
        }
    }

    private void sendTogether(List<Pending<R, T>> batch) {
        List<R> requests = new ArrayList<>(batch.size());
        for (Pending<R, T> pending : batch) {
            requests.add(pending.request);
        }
        Mono<List<T>> replies;
        try {
            replies = many.apply(requests);
        } catch (RuntimeException e) {
            replies = Mono.error(e);
        }
        AtomicBoolean answered = new AtomicBoolean();
        replies.subscribe(list -> {
            if (!answered.compareAndSet(false, true)) {
                return;
            }
            if (list.size() != batch.size()) {
                fail(batch, new IllegalStateException("a batched script answered " + list.size() + " replies to "
                        + batch.size() + " requests"));
            } else {
                for (int i = 0; i < batch.size(); i++) {
                    batch.get(i).sink.success(list.get(i));
                }
            }
            finished();
        }, e -> {
            if (answered.compareAndSet(false, true)) {
                fail(batch, e);
                finished();
            }
        }, () -> {
            if (answered.compareAndSet(false, true)) {
                fail(batch, new IllegalStateException("a batched script answered nothing"));
                finished();
            }
        });
    }

    private void fail(List<Pending<R, T>> batch, Throwable error) {
        for (Pending<R, T> pending : batch) {
            pending.sink.error(classify.apply(error, pending.request));
        }
    }

    private void finished() {
        inFlight.decrementAndGet();
        wake();
    }

    private record Pending<R, T>(R request, MonoSink<T> sink) {
    }
}
