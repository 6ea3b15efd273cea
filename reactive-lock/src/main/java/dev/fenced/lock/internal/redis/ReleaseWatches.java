package dev.fenced.lock.internal.redis;

import dev.fenced.lock.internal.KeyLayout;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * The release-notification subscriptions of a {@link RedisLeaseStore}: one channel subscription per watched
 * lock on the one pub/sub connection, reference-counted, with SUBSCRIBE and UNSUBSCRIBE sent one at a time in
 * the order the watches changed. Thread-safe: the watches are guarded by their map's monitor, except the
 * counts.
 */
final class ReleaseWatches {

    private static final Logger log = Loggers.getLogger(ReleaseWatches.class);

    private final RedisConnections connections;
    private final RedisCommands commands;
    private final KeyLayout keys;
    private final Scheduler scheduler;
    private final Map<String, ChannelWatch> watches = new ConcurrentHashMap<>();
    private final AtomicBoolean permissionWarned = new AtomicBoolean();
    // Pub/sub commands, one at a time in the order they were queued (under the watches lock).
    private final Sinks.Many<Mono<Void>> pubSubCommands = Sinks.many().unicast().onBackpressureBuffer();
    private final Disposable pubSubWorker = pubSubCommands.asFlux()
            .concatMap(command -> command.onErrorResume(e -> Mono.empty()), 1)
            .subscribe();

    ReleaseWatches(RedisConnections connections, RedisCommands commands, KeyLayout keys, Scheduler scheduler) {
        this.connections = connections;
        this.commands = commands;
        this.keys = keys;
        this.scheduler = scheduler;
    }

    /**
     * Watches the releases of a lock; see {@link dev.fenced.lock.internal.LeaseStore#releases(String)}.
     *
     * @param name the lock name
     * @return the notification counts
     */
    Flux<Long> releases(String name) {
        String channel = keys.releaseChannel(name);
        return Flux.defer(() -> {
            ChannelWatch watch;
            synchronized (watches) {
                watch = watches.get(channel);
                if (watch == null) {
                    watch = new ChannelWatch();
                    watch.confirmed = inOrder(connections.subscribe(channel)
                            .timeout(commands.connectTimeout().plus(commands.commandTimeout()), scheduler)
                            .doOnError(e -> subscribeFailed(channel, e)));
                    watches.put(channel, watch);
                }
                watch.refs++;
            }
            ChannelWatch w = watch;
            return w.confirmed.thenMany(w.counts.asFlux()).doFinally(signal -> unwatch(channel, w));
        });
    }

    private void unwatch(String channel, ChannelWatch watch) {
        synchronized (watches) {
            if (--watch.refs == 0 && watches.remove(channel, watch)) {
                inOrder(connections.unsubscribe(channel)
                        .timeout(commands.connectTimeout().plus(commands.commandTimeout()), scheduler)
                        .doOnError(e -> log.debug("UNSUBSCRIBE {} failed: {}", channel, e.toString())));
            }
        }
    }

    /**
     * The server ended a subscription we did not end (a sharded channel whose slot moved): subscribe again,
     * on the slot's new node, if someone still watches it. Notifications missed meanwhile are covered by
     * the waiters' timers.
     */
    void resubscribe(String channel) {
        synchronized (watches) {
            if (watches.containsKey(channel)) {
                inOrder(connections.subscribe(channel)
                        .timeout(commands.connectTimeout().plus(commands.commandTimeout()), scheduler)
                        .doOnError(e -> subscribeFailed(channel, e)));
            }
        }
    }

    /**
     * A refused SUBSCRIBE is not a failure: the waiters go on with their timers. A user that may not subscribe
     * (an ACL without the channels) is told once, at WARN; other failures are logged at DEBUG.
     */
    private void subscribeFailed(String channel, Throwable e) {
        if (RedisErrors.noPermission(e) && permissionWarned.compareAndSet(false, true)) {
            log.warn("Redis refused to subscribe to the release channel {} ({}): waiters of this client wait on their "
                    + "timers alone, without release notifications. Allow the user the channels listed in the README's "
                    + "\"Redis requirements\"", channel, e.getMessage());
        } else {
            log.debug("SUBSCRIBE {} failed: {}", channel, e.toString());
        }
    }

    /**
     * Queues a pub/sub command behind the earlier ones; called under the watches lock, so commands are queued
     * in the order the watches changed. They reach the server in that order even while the pub/sub
     * connection is still opening (commands waiting for one connection would otherwise go out in any order, and
     * an UNSUBSCRIBE overtaking its SUBSCRIBE would leave a waiter deaf for good).
     *
     * @param command the command
     * @return completes when the command has
     */
    private Mono<Void> inOrder(Mono<Void> command) {
        Sinks.Empty<Void> done = Sinks.empty();
        pubSubCommands.tryEmitNext(command.doOnSuccess(nothing -> done.tryEmitEmpty()).doOnError(done::tryEmitError));
        return done.asMono();
    }

    void onRelease(String channel) {
        ChannelWatch watch = watches.get(channel);
        if (watch != null) {
            watch.notifyRelease();
        }
    }

    /** Stops sending pub/sub commands; the connection closes with the store's. */
    void close() {
        pubSubWorker.dispose();
    }

    /** The watchers of one channel. Guarded by {@code watches}, except the counts. */
    private static final class ChannelWatch {

        private final AtomicLong count = new AtomicLong();
        private final Sinks.Many<Long> counts = Sinks.many().replay().latest();
        private Mono<Void> confirmed = Mono.empty();
        private int refs;

        ChannelWatch() {
            counts.tryEmitNext(0L);
        }

        void notifyRelease() {
            // Messages of one channel arrive on the pub/sub connection's single event-loop thread.
            counts.tryEmitNext(count.incrementAndGet());
        }
    }
}
