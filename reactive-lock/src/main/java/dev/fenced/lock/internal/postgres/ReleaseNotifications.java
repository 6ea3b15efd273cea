package dev.fenced.lock.internal.postgres;

import dev.fenced.lock.internal.KeyLayout;
import io.r2dbc.postgresql.api.PostgresqlConnection;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Result;
import io.r2dbc.spi.Wrapped;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * The release notifications of a {@link PostgresLeaseStore}: one connection that has run {@code LISTEN} on the
 * lease table's channel, shared by every watcher of the client, and a count per watched lock that grows with
 * every {@code NOTIFY} whose payload is that lock's id. The connection is opened on the first watch; when it
 * is lost it is opened again (at once for the next watch, after a second while watches remain), and every
 * watch then counts one release, since releases sent meanwhile were not heard: the head waiters try again at
 * once rather than on their timers.
 *
 * <p>Thread-safe: the watches and the connection are guarded by this object's monitor.
 */
final class ReleaseNotifications {

    private static final Logger log = Loggers.getLogger(ReleaseNotifications.class);
    private static final long RELISTEN_DELAY_MILLIS = 1_000;

    private final PostgresCommands commands;
    private final KeyLayout keys;
    private final Scheduler scheduler;
    private final String listenStatement;
    private final Map<String, Watch> watches = new HashMap<>();
    // Completes once LISTEN is confirmed; a lost connection (or a failure to open one) is not kept.
    private final Mono<Listener> listening;
    private @Nullable Listener active;
    private boolean everListened;
    private boolean closed;

    ReleaseNotifications(PostgresCommands commands, KeyLayout keys, Scheduler scheduler, String channel) {
        this.commands = commands;
        this.keys = keys;
        this.scheduler = scheduler;
        this.listenStatement = "LISTEN \"" + channel + "\"";
        this.listening = Mono.defer(this::listen).cacheInvalidateIf(Listener::lost);
    }

    /**
     * Watches the releases of a lock; see {@link dev.fenced.lock.internal.LeaseStore#releases(String)}.
     *
     * @param name the lock name
     * @return the notification counts
     */
    Flux<Long> releases(String name) {
        String lockId = keys.lockKey(name);
        return Flux.defer(() -> {
            Watch watch;
            synchronized (this) {
                watch = watches.computeIfAbsent(lockId, id -> new Watch());
                watch.refs++;
            }
            return listening.thenMany(watch.counts.asFlux()).doFinally(signal -> unwatch(lockId, watch));
        });
    }

    private void unwatch(String lockId, Watch watch) {
        synchronized (this) {
            if (--watch.refs == 0) {
                watches.remove(lockId, watch);
            }
        }
    }

    private Mono<Listener> listen() {
        synchronized (this) {
            if (closed) {
                return Mono.error(new PostgresErrors.NotConnectedException("the lock client is closed", null));
            }
        }
        return commands.connect().flatMap(connection -> {
            Listener listener = new Listener(connection);
            try {
                // Subscribed before LISTEN runs, so that no notification after the confirmation is missed.
                listener.notifications = unwrap(connection).getNotifications().subscribe(
                        n -> onNotification(n.getParameter()), e -> lost(listener, e), () -> lost(listener, null));
            } catch (RuntimeException e) {
                return listener.close().then(Mono.error(e));
            }
            return Flux.from(connection.createStatement(listenStatement).execute())
                    .flatMap(Result::getRowsUpdated)
                    .then()
                    .timeout(commands.commandTimeout(), scheduler)
                    .then(Mono.fromCallable(() -> confirmed(listener)))
                    .onErrorResume(e -> listener.close().then(Mono.error(e)));
        });
    }

    private Listener confirmed(Listener listener) {
        List<Watch> deaf;
        synchronized (this) {
            if (closed) {
                throw new PostgresErrors.NotConnectedException("the lock client is closed", null);
            }
            active = listener;
            deaf = everListened ? List.copyOf(watches.values()) : List.of();
            everListened = true;
        }
        // Releases sent while no connection listened were lost: let the head waiters try again now.
        deaf.forEach(Watch::notifyRelease);
        return listener;
    }

    private void onNotification(@Nullable String lockId) {
        Watch watch;
        synchronized (this) {
            watch = lockId == null ? null : watches.get(lockId);
        }
        if (watch != null) {
            watch.notifyRelease();
        }
    }

    private void lost(Listener listener, @Nullable Throwable error) {
        boolean relisten;
        synchronized (this) {
            listener.lost = true;
            if (active == listener) {
                active = null;
            }
            relisten = !closed && !watches.isEmpty();
        }
        log.debug("The LISTEN connection was lost{}", error == null ? "" : ": " + error);
        listener.close().subscribe(null, e -> { });
        if (relisten) {
            scheduleRelisten();
        }
    }

    private void scheduleRelisten() {
        scheduler.schedule(() -> {
            synchronized (this) {
                if (closed || watches.isEmpty()) {
                    return;
                }
            }
            listening.subscribe(null, e -> {
                log.debug("LISTEN again failed, trying again in {} ms: {}", RELISTEN_DELAY_MILLIS, e.toString());
                scheduleRelisten();
            });
        }, RELISTEN_DELAY_MILLIS, TimeUnit.MILLISECONDS);
    }

    /**
     * Closes the listening connection.
     *
     * @return completion
     */
    Mono<Void> close() {
        Listener listener;
        synchronized (this) {
            closed = true;
            listener = active;
            active = null;
        }
        return listener == null ? Mono.empty() : listener.close().onErrorResume(e -> Mono.empty());
    }

    /** The driver's connection under the pool's wrappers: only r2dbc-postgresql's can receive notifications. */
    private static PostgresqlConnection unwrap(Connection connection) {
        Object c = connection;
        while (!(c instanceof PostgresqlConnection) && c instanceof Wrapped<?> wrapped) {
            c = wrapped.unwrap();
        }
        if (c instanceof PostgresqlConnection postgres) {
            return postgres;
        }
        throw new IllegalStateException("Release notifications need connections of r2dbc-postgresql (LISTEN/NOTIFY), but the "
                + "connection factory gave a " + connection.getClass().getName());
    }

    /** One listening connection. Its fields are guarded by the notifications' monitor. */
    private static final class Listener {

        private final Connection connection;
        private @Nullable Disposable notifications;
        private volatile boolean lost;
        private boolean closed;

        Listener(Connection connection) {
            this.connection = connection;
        }

        boolean lost() {
            return lost;
        }

        Mono<Void> close() {
            return Mono.defer(() -> {
                synchronized (this) {
                    if (closed) {
                        return Mono.empty();
                    }
                    closed = true;
                    lost = true;
                }
                Disposable d = notifications;
                if (d != null) {
                    d.dispose();
                }
                return Mono.from(connection.close());
            });
        }
    }

    /** The watchers of one lock. The references are guarded by the notifications' monitor. */
    private static final class Watch {

        private final Sinks.Many<Long> counts = Sinks.many().replay().latest();
        private long count;
        private int refs;

        Watch() {
            counts.tryEmitNext(0L);
        }

        synchronized void notifyRelease() {
            counts.tryEmitNext(++count);
        }
    }
}
