package dev.fenced.spring;

import dev.fenced.lock.FencedLockClient;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.ReactiveHealthIndicator;
import reactor.core.publisher.Mono;

/**
 * Health of the lock client: UP when the lock service answers a {@code PING} within the command timeout,
 * DOWN otherwise; details give the round trip and the number of held leases. Thread-safe.
 */
public final class FencedLockHealthIndicator implements ReactiveHealthIndicator {

    private final FencedLockClient client;

    /**
     * An indicator for {@code client}.
     *
     * @param client the lock client
     */
    public FencedLockHealthIndicator(FencedLockClient client) {
        this.client = client;
    }

    /**
     * Pings the lock service. Cold: each subscription sends one {@code PING}; it never errors (a failure is a
     * DOWN health) and completes within the client's connect or command timeout.
     *
     * @return the health
     */
    @Override
    public Mono<Health> health() {
        return client.ping()
                .map(roundTrip -> Health.up()
                        .withDetail("roundTripMillis", roundTrip.toNanos() / 1_000_000.0)
                        .withDetail("heldLeases", client.heldLeases())
                        .build())
                .onErrorResume(error -> Mono.just(Health.down(error)
                        .withDetail("heldLeases", client.heldLeases())
                        .build()));
    }
}
