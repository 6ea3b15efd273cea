package dev.fenced.lock.internal;

import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;

/**
 * The store calls of one batch's releases, gathered into one {@link LeaseStore#releaseAll} call: each lease's release
 * hands in its owner-checked request while it is subscribed ({@link HeldLease#release(BatchedReleases)}), and
 * {@link #send()}, called once every release of the batch has been subscribed, sends what was handed in. A lease
 * that needs no store call (already released, handed off to a waiter of this client) hands in nothing. A request
 * handed in after the call left (a release subscribed later, on another thread) is sent alone, as
 * {@link LeaseStore#release} sends it, so that no release waits for a call that will never come. Each release gets
 * its own result or failure. Thread-safe: one monitor guards the requests until the call leaves.
 */
final class BatchedReleases {

    private final LeaseStore store;
    private final List<LeaseStore.ReleaseRequest> requests = new ArrayList<>();
    private final List<MonoSink<Boolean>> sinks = new ArrayList<>();
    private boolean sent;

    /**
     * @param store the store
     */
    BatchedReleases(LeaseStore store) {
        this.store = store;
    }

    /**
     * The owner-checked release of one lease, as {@link LeaseStore#release}: its result comes from the batch's call.
     *
     * @param name the lock name
     * @param owner the owner id
     * @param token the token, or {@code null} for any token of the owner
     * @return whether the lock held the lease and was deleted
     */
    Mono<Boolean> release(String name, String owner, @Nullable Long token) {
        return Mono.create(sink -> {
            boolean late;
            synchronized (this) {
                late = sent;
                if (!late) {
                    requests.add(new LeaseStore.ReleaseRequest(name, owner, token));
                    sinks.add(sink);
                }
            }
            if (late) {
                sendAlone(new LeaseStore.ReleaseRequest(name, owner, token), sink);
            }
        });
    }

    /** Sends the requests handed in so far, once; those handed in later are sent alone. */
    void send() {
        List<LeaseStore.ReleaseRequest> batch;
        List<MonoSink<Boolean>> replyTo;
        synchronized (this) {
            if (sent) {
                return;
            }
            sent = true;
            batch = List.copyOf(requests);
            replyTo = List.copyOf(sinks);
            requests.clear();
            sinks.clear();
        }
        if (batch.isEmpty()) {
            return;
        }
        if (batch.size() == 1) {
            sendAlone(batch.get(0), replyTo.get(0));
            return;
        }
        store.releaseAll(batch).defaultIfEmpty(List.of()).subscribe(results -> {
            for (int i = 0; i < replyTo.size(); i++) {
                LeaseStore.ReleaseResult result = i < results.size() ? results.get(i) : null;
                MonoSink<Boolean> sink = replyTo.get(i);
                if (result == null) {
                    sink.error(new IllegalStateException("the store answered " + results.size() + " results for "
                            + replyTo.size() + " releases"));
                } else if (result.failure() != null) {
                    sink.error(result.failure());
                } else {
                    sink.success(Boolean.TRUE.equals(result.released()));
                }
            }
        }, error -> replyTo.forEach(sink -> sink.error(error)));
    }

    /** One release as {@link LeaseStore#release} sends it, answering {@code sink}. */
    private void sendAlone(LeaseStore.ReleaseRequest request, MonoSink<Boolean> sink) {
        store.release(request.name(), request.owner(), request.token()).subscribe(sink::success, sink::error, sink::success);
    }
}
