package dev.fenced.lock.internal;

import java.util.ArrayList;
import java.util.List;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;

/**
 * The store calls of one batch's attempts, gathered into one {@link LeaseStore#acquireAll} call: each attempt hands
 * in its request (owner id, lease time, floor) when it starts, and the call leaves once every attempt has, or at once
 * when the batch is cancelled before that (an attempt that never started sends nothing). Each attempt gets its own
 * reply or failure, so the attempts keep their own undo and grant ({@link AcquireAttempt}). Thread-safe: one
 * monitor guards the requests until the call leaves.
 */
final class BatchedAcquires {

    private final LeaseStore store;
    private final InFlight inFlight;
    private final int expected;
    private final List<LeaseStore.AcquireRequest> requests;
    private final List<MonoSink<LeaseStore.AcquireReply>> sinks;
    private boolean sent;

    /**
     * @param store the store
     * @param inFlight the client's commands in flight, so that close waits for this call
     * @param expected how many attempts the batch makes
     */
    BatchedAcquires(LeaseStore store, InFlight inFlight, int expected) {
        this.store = store;
        this.inFlight = inFlight;
        this.expected = expected;
        this.requests = new ArrayList<>(expected);
        this.sinks = new ArrayList<>(expected);
    }

    /**
     * The store call of the attempt on {@code name}: its reply comes from the batch's call.
     *
     * @param name the lock name
     * @return the attempt's sender
     */
    AcquireAttempt.Sender sender(String name) {
        return (owner, leaseMillis, floor) -> Mono.create(sink -> add(new LeaseStore.AcquireRequest(name, owner,
                leaseMillis, floor), sink));
    }

    private void add(LeaseStore.AcquireRequest request, MonoSink<LeaseStore.AcquireReply> sink) {
        boolean full;
        synchronized (this) {
            if (sent) {
                // An attempt that started while the batch was being cancelled, after its call left: it is sent
                // nothing (its undo finds nothing to release), and fails rather than wait for ever.
                sink.error(new IllegalStateException("an attempt of lock '" + request.name() + "' joined a batch "
                        + "already sent"));
                return;
            }
            requests.add(request);
            sinks.add(sink);
            full = requests.size() == expected;
        }
        if (full) {
            send();
        }
    }

    /** Sends the requests handed in so far, if not sent yet: the batch was cancelled before every attempt started. */
    void sendNow() {
        send();
    }

    private void send() {
        List<LeaseStore.AcquireRequest> batch;
        List<MonoSink<LeaseStore.AcquireReply>> replyTo;
        synchronized (this) {
            if (sent || requests.isEmpty()) {
                sent = true;
                return;
            }
            sent = true;
            batch = List.copyOf(requests);
            replyTo = List.copyOf(sinks);
        }
        inFlight.track(store.acquireAll(batch)).subscribe(results -> {
            for (int i = 0; i < replyTo.size(); i++) {
                LeaseStore.AcquireResult result = i < results.size() ? results.get(i) : null;
                if (result == null) {
                    replyTo.get(i).error(new IllegalStateException("the store answered " + results.size()
                            + " results for " + replyTo.size() + " acquires"));
                } else if (result.failure() != null) {
                    replyTo.get(i).error(result.failure());
                } else {
                    replyTo.get(i).success(result.reply());
                }
            }
        }, error -> replyTo.forEach(sink -> sink.error(error)));
    }
}
