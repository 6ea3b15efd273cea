package dev.fenced.demo;

import dev.fenced.lock.FencedLockClient;
import io.lettuce.core.RedisURI;
import io.netty.channel.EventLoopGroup;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.core.env.Environment;
import reactor.core.publisher.Mono;

/**
 * One "instance" of the service that runs the scheduled job: a lock client of its own, with its own holder label,
 * and its own way to Redis and PostgreSQL ({@link RelayedServices}), so that it can be paused as a whole while the
 * other instance runs on. A paused instance fires no ticks, as a paused process runs no timers. Thread-safe.
 */
final class JobInstance {

    private static final int NOT_PAUSED = 0;

    private final String id;
    private final String label;
    private final FencedLockClient locks;
    private final RelayedServices services;
    // The tick at which it was paused, or NOT_PAUSED: one state field, changed by compare-and-set.
    private final AtomicInteger pausedAtTick = new AtomicInteger(NOT_PAUSED);

    private JobInstance(String id, String label, FencedLockClient locks, RelayedServices services) {
        this.id = id;
        this.label = label;
        this.locks = locks;
        this.services = services;
    }

    /** Opens instance {@code number} ({@code instance-1}, ...) with holder label {@code label}. */
    static Mono<JobInstance> open(int number, String label, EventLoopGroup relayLoop, RedisURI redis,
            Environment environment, String keyPrefix) {
        return RelayedServices.open(relayLoop, redis, environment)
                // Emitted on a bounded-elastic thread: building a client draws its id from SecureRandom.
                .flatMap(services -> Mono.fromCallable(() -> FencedLockClient.builder()
                                .redisUri(services.redis())
                                .keyPrefix(keyPrefix)
                                .commandTimeout(Duration.ofMillis(500))
                                .holderLabel(label)
                                .build())
                        // Connects before the first tick: lockAtMostFor counts from before the acquire is sent, so a
                        // first tick that also had to connect would spend its hold on connecting.
                        .flatMap(client -> client.ping().onErrorResume(e -> Mono.empty()).thenReturn(client))
                        .map(client -> new JobInstance("instance-" + number, label, client, services))
                        .onErrorResume(e -> services.close().then(Mono.error(e))));
    }

    /** {@code instance-1} or {@code instance-2}. */
    String id() {
        return id;
    }

    /** The holder label its lock client stores with every grant. */
    String label() {
        return label;
    }

    FencedLockClient locks() {
        return locks;
    }

    RelayedServices services() {
        return services;
    }

    boolean paused() {
        return pausedAtTick.get() != NOT_PAUSED;
    }

    /** The tick at which it was paused; 0 when it runs. */
    int pausedAtTick() {
        return pausedAtTick.get();
    }

    /** Pauses it (its traffic to both servers) at {@code tick}; false if it was paused already. */
    boolean pause(int tick) {
        if (!pausedAtTick.compareAndSet(NOT_PAUSED, tick)) {
            return false;
        }
        services.stall();
        return true;
    }

    /** Lets it move again; what it sent while paused is delivered. False if it was not paused. */
    boolean resume() {
        if (pausedAtTick.getAndSet(NOT_PAUSED) == NOT_PAUSED) {
            return false;
        }
        services.resume();
        return true;
    }

    /** As {@link #resume()}, only if it is still the pause made at {@code tick} (not a later one). */
    boolean resumePauseOf(int tick) {
        if (tick == NOT_PAUSED || !pausedAtTick.compareAndSet(tick, NOT_PAUSED)) {
            return false;
        }
        services.resume();
        return true;
    }

    /** Resumes it, closes its lock client (releasing what it holds) and its relays. */
    Mono<Void> close() {
        return Mono.defer(() -> {
            resume();
            return locks.closeLater().onErrorResume(e -> Mono.empty()).then(services.close());
        });
    }
}
