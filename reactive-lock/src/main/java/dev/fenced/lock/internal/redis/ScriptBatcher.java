package dev.fenced.lock.internal.redis;

import io.netty.channel.EventLoop;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.internal.ThreadExecutorMap;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiConsumer;
import java.util.function.BiFunction;
import java.util.function.Function;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;

/**
 * Sends the lock commands of one kind (acquires, or releases) that wait at the same time as one script call: the
 * script takes a list of locks and answers for each, so a hundred acquires in flight cost Redis a few script calls
 * instead of a hundred. Each request keeps its own reply, or its own failure: the script answers an error for one
 * lock without failing the others, and a call that fails as a whole fails every request it carried, each with its
 * own lock's name.
 *
 * <p>When to send:
 * <ul>
 *   <li>At most {@link #MAX_IN_FLIGHT} calls of this kind are in flight; requests made meanwhile wait, and leave
 *       together as soon as a call answers: up to {@link #BATCH} a call, more (an eighth of those waiting, up
 *       to {@link #MAX_BATCH}) when more than {@code 8 × 16} wait. Below that bound a request made off an event
 *       loop leaves at once: one acquire at a time pays nothing for batching.</li>
 *   <li>A request made on a Netty I/O event loop (the callbacks of Lettuce's replies run there) leaves at the end
 *       of that thread's current turn, with every other request the turn made: the replies that one read decodes
 *       answer many requests, whose next commands go out as one call. Each thread keeps its own turn: a request
 *       never waits for another thread's. So code on an event loop must never block waiting for a lock command
 *       it made there (blocking an event loop is wrong anyway: Reactor Netty and Lettuce forbid it).</li>
 *   <li>A request that has waited longer than the command timeout when a call could take it fails without being
 *       sent (nothing ran on Redis: no undo needed); one that leaves then has the command timeout for its reply.</li>
 *   <li>A server that refuses a call whose keys span hash slots ({@code CROSSSLOT}: a proxy or a sharded service
 *       behind one address) gets every request alone from then on; the refused call ran nothing.</li>
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
     * The most requests a call carries while at most {@code MAX_IN_FLIGHT × BATCH} wait. Small enough that 64
     * requests in flight make several calls, which overlap: while Redis runs one, the client handles the replies of
     * another (one call of 64 leaves both sides idle in turn, and ran slower than one call per request); large
     * enough that a call's own cost is shared.
     */
    static final int BATCH = 16;

    /** The most requests one call carries: a call of this many holds Redis for about a millisecond. */
    static final int MAX_BATCH = 256;

    /** The most calls of one kind in flight at once; more requests wait for one of them to answer. */
    static final int MAX_IN_FLIGHT = 8;

    /** The requests to drain at the end of the current turn of an event loop, per thread. */
    private static final ThreadLocal<EndOfTurn> END_OF_TURN = ThreadLocal.withInitial(EndOfTurn::new);

    private final Function<R, Mono<T>> one;
    private final Function<List<R>, Mono<List<Reply<T>>>> many;
    private final BiFunction<Throwable, R, Throwable> classify;
    private final Duration commandTimeout;
    private final long timeoutNanos;
    private final Queue<Pending<R, T>> waiting = new ConcurrentLinkedQueue<>();
    private final AtomicInteger waitingCount = new AtomicInteger();
    private final AtomicInteger inFlight = new AtomicInteger();
    private final AtomicInteger drainsAsked = new AtomicInteger();
    private volatile boolean alone;

    /**
     * @param one sends one request alone
     * @param many sends several requests in one call, connecting first as {@code one} does (a burst may come
     *     before any connection is open); replies in the requests' order, call failures unclassified
     * @param classify a failure as the given request reports it: of a call of {@code many}, of one lock in it,
     *     or a {@link RedisErrors.WaitedTooLongException}
     * @param commandTimeout the command timeout
     */
    ScriptBatcher(Function<R, Mono<T>> one, Function<List<R>, Mono<List<Reply<T>>>> many,
            BiFunction<Throwable, R, Throwable> classify, Duration commandTimeout) {
        this.one = one;
        this.many = many;
        this.classify = classify;
        this.commandTimeout = commandTimeout;
        this.timeoutNanos = commandTimeout.toNanos();
    }

    /**
     * One lock's answer in a call of several: its reply, or the error the script met for it alone.
     *
     * @param value the reply, or {@code null} with an error
     * @param error the error, or {@code null}
     * @param <T> the reply type
     */
    record Reply<T>(@Nullable T value, @Nullable Throwable error) {

        static <T> Reply<T> of(T value) {
            return new Reply<>(value, null);
        }

        static <T> Reply<T> failed(Throwable error) {
            return new Reply<>(null, error);
        }
    }

    /**
     * Sends a request, alone or with others. Cold: the request waits for its call once subscribed. Cancelling
     * does not take it back (see the class comment). The reply, or the request's own failure (classified for it),
     * is signalled on the thread that receives the call's answer: a Lettuce I/O thread, or the thread a timeout
     * fires on; a request that waited too long fails on the thread that would have sent it.
     *
     * @param request the request
     * @return its reply
     */
    Mono<T> send(R request) {
        return Mono.create(sink -> {
            waiting.offer(new Pending<>(request, sink, System.nanoTime()));
            waitingCount.incrementAndGet();
            wake();
        });
    }

    /** Drains now, or at the end of the calling event loop's turn. */
    private void wake() {
        EventExecutor executor = ThreadExecutorMap.currentExecutor();
        if (executor instanceof EventLoop loop && loop.inEventLoop()) {
            EndOfTurn turn = END_OF_TURN.get();
            if (turn.add(this, loop)) {
                return;
            }
        }
        drain();
    }

    /** Sends what may be sent; one thread at a time runs the loop, the others' asks make it run again. */
    private void drain() {
        if (drainsAsked.getAndIncrement() != 0) {
            return;
        }
        Throwable thrown = null;
        do {
            try {
                drainOnce();
            } catch (Throwable e) {
                // Keep draining what the other asks are owed; report the first failure once done.
                thrown = first(thrown, e);
            }
        } while (drainsAsked.decrementAndGet() != 0);
        rethrow(thrown);
    }

    private static Throwable first(@Nullable Throwable first, Throwable next) {
        if (first == null) {
            return next;
        }
        first.addSuppressed(next);
        return first;
    }

    private static void rethrow(@Nullable Throwable thrown) {
        if (thrown instanceof RuntimeException e) {
            throw e;
        }
        if (thrown instanceof Error e) {
            throw e;
        }
        if (thrown != null) {
            throw new IllegalStateException(thrown);
        }
    }

    private void drainOnce() {
        for (;;) {
            int calls = inFlight.get();
            if (calls >= MAX_IN_FLIGHT || waitingCount.get() <= 0) {
                return;
            }
            if (!inFlight.compareAndSet(calls, calls + 1)) {
                continue;
            }
            int size = Math.max(BATCH, Math.min(MAX_BATCH, (waitingCount.get() + MAX_IN_FLIGHT - 1) / MAX_IN_FLIGHT));
            List<Pending<R, T>> batch = new ArrayList<>(Math.max(1, Math.min(size, waitingCount.get())));
            long now = System.nanoTime();
            Pending<R, T> next;
            while (batch.size() < size && (next = waiting.poll()) != null) {
                waitingCount.decrementAndGet();
                if (now - next.queuedAt > timeoutNanos) {
                    next.sink.error(classify.apply(new RedisErrors.WaitedTooLongException(commandTimeout),
                            next.request));
                } else {
                    batch.add(next);
                }
            }
            if (batch.isEmpty()) {
                inFlight.decrementAndGet();
                continue;
            }
            if (batch.size() == 1 || alone) {
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
            call(() -> one.apply(pending.request), (value, error) -> {
                try {
                    if (error != null) {
                        pending.sink.error(error);
                    } else if (value != null) {
                        pending.sink.success(value);
                    } else {
                        pending.sink.success();
                    }
                } finally {
                    if (unanswered.decrementAndGet() == 0) {
                        finished();
                    }
                }
            });
        }
    }

    private void sendTogether(List<Pending<R, T>> batch) {
        List<R> requests = new ArrayList<>(batch.size());
        for (Pending<R, T> pending : batch) {
            requests.add(pending.request);
        }
        call(() -> many.apply(requests), (replies, error) -> {
            if (error != null && RedisErrors.crossSlot(error)) {
                // Refused before it ran: this server takes one slot a call. Send each alone, now and from now on.
                alone = true;
                sendAlone(batch);
                return;
            }
            try {
                if (error != null) {
                    fail(batch, error);
                } else if (replies == null) {
                    fail(batch, new IllegalStateException("a batched lock script answered nothing"));
                } else {
                    answer(batch, replies);
                }
            } finally {
                finished();
            }
        });
    }

    /**
     * Makes one call and hands its outcome to {@code outcome} exactly once: its value, or its error, or neither
     * when it completes empty. A call that throws instead of returning a Mono has that error as its outcome.
     */
    private static <X> void call(Supplier<Mono<X>> send, BiConsumer<@Nullable X, @Nullable Throwable> outcome) {
        Mono<X> reply;
        try {
            reply = send.get();
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

    private void answer(List<Pending<R, T>> batch, List<Reply<T>> replies) {
        if (replies.size() != batch.size()) {
            fail(batch, new IllegalStateException("a batched lock script answered " + replies.size() + " replies to "
                    + batch.size() + " requests"));
            return;
        }
        Throwable thrown = null;
        for (int i = 0; i < batch.size(); i++) {
            Pending<R, T> pending = batch.get(i);
            Reply<T> reply = replies.get(i);
            try {
                if (reply.error() != null) {
                    pending.sink.error(classify.apply(reply.error(), pending.request));
                } else {
                    pending.sink.success(reply.value());
                }
            } catch (Throwable e) {
                // Every other request of the call still gets its answer.
                thrown = first(thrown, e);
            }
        }
        rethrow(thrown);
    }

    private void fail(List<Pending<R, T>> batch, Throwable error) {
        Throwable thrown = null;
        for (Pending<R, T> pending : batch) {
            try {
                pending.sink.error(classify.apply(error, pending.request));
            } catch (Throwable e) {
                thrown = first(thrown, e);
            }
        }
        rethrow(thrown);
    }

    private void finished() {
        inFlight.decrementAndGet();
        if (waitingCount.get() > 0) {
            wake();
        }
    }

    private record Pending<R, T>(R request, MonoSink<T> sink, long queuedAt) {
    }

    /** The batchers one event-loop thread asked to drain during its current turn; confined to that thread. */
    private static final class EndOfTurn implements Runnable {

        private final List<ScriptBatcher<?, ?>> batchers = new ArrayList<>(2);
        private boolean scheduled;

        /** Whether the batcher will drain at the end of this turn (false: the loop refused the task; drain now). */
        boolean add(ScriptBatcher<?, ?> batcher, EventLoop loop) {
            if (!batchers.contains(batcher)) {
                batchers.add(batcher);
            }
            if (!scheduled) {
                try {
                    loop.execute(this);
                } catch (RejectedExecutionException shuttingDown) {
                    batchers.remove(batcher);
                    return false;
                }
                scheduled = true;
            }
            return true;
        }

        @Override
        public void run() {
            scheduled = false;
            // A drain may add a batcher again (a reply that arrives inline): take a copy first.
            List<ScriptBatcher<?, ?>> due = new ArrayList<>(batchers);
            batchers.clear();
            Throwable thrown = null;
            for (ScriptBatcher<?, ?> batcher : due) {
                try {
                    batcher.drain();
                } catch (Throwable e) {
                    // Every batcher drains, whatever one of them threw.
                    thrown = first(thrown, e);
                }
            }
            rethrow(thrown);
        }
    }
}
