package dev.fenced.lock;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.channel.DefaultEventLoop;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

/** Races that several suites run against their stores, each checked the same way. */
final class LockRaces {

    private LockRaces() {
    }

    /**
     * {@code count} tryAcquires of distinct names ({@code name-0}, {@code name-1}, …) in one turn of one event loop,
     * as a service that just started gets its first requests; asserts that each was granted.
     *
     * @return the leases, in name order
     */
    static List<FencedLease> burstOnOneEventLoop(FencedLockClient locks, String name, int count, Duration bound)
            throws Exception {
        DefaultEventLoop loop = new DefaultEventLoop();
        try {
            List<CompletableFuture<FencedLease>> pending = new ArrayList<>();
            loop.submit(() -> {
                for (int i = 0; i < count; i++) {
                    pending.add(locks.tryAcquire(name + "-" + i).toFuture());
                }
            }).get(bound.toMillis(), TimeUnit.MILLISECONDS);
            List<FencedLease> leases = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                FencedLease lease = pending.get(i).get(bound.toMillis(), TimeUnit.MILLISECONDS);
                assertThat(lease).as(name + "-" + i + " granted").isNotNull();
                leases.add(lease);
            }
            return leases;
        } finally {
            loop.shutdownGracefully(0, 1, TimeUnit.SECONDS);
        }
    }

    /**
     * Every client runs {@code rounds} scopes of {@code withLease(name)} at once, so that they compete for every
     * hand-over; asserts that no two scopes overlapped and that the tokens strictly increased.
     */
    static void handOvers(List<FencedLockClient> clients, String name, int rounds, Duration bound) {
        AtomicInteger inside = new AtomicInteger();
        AtomicBoolean overlapped = new AtomicBoolean();
        List<Long> tokens = Collections.synchronizedList(new ArrayList<>());
        Flux<Long> work = Flux.fromIterable(clients).flatMap(c -> Flux.range(0, rounds).concatMap(i -> c.withLease(name,
                lease -> Mono.fromCallable(() -> {
                    if (inside.incrementAndGet() != 1) {
                        overlapped.set(true);
                    }
                    tokens.add(lease.token());
                    inside.decrementAndGet();
                    return lease.token();
                }))));
        StepVerifier.create(work).expectNextCount((long) clients.size() * rounds).expectComplete().verify(bound);

        assertThat(overlapped).as("two holders at once").isFalse();
        assertThat(tokens).hasSize(clients.size() * rounds);
        for (int i = 1; i < tokens.size(); i++) {
            assertThat(tokens.get(i)).as("token %d", i).isGreaterThan(tokens.get(i - 1));
        }
    }
}
