package dev.fenced.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;

import dev.fenced.testservices.RedisServer;
import dev.fenced.testservices.RedisServerExtension;
import dev.fenced.testservices.TcpProxy;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.test.StepVerifier;

/**
 * Closing is always possible: {@code closeLater()} completes and never errors, {@code close()} returns
 * without throwing, whatever Redis does. Against a real Redis, and a proxy that accepts connections and
 * never answers.
 */
@ExtendWith(RedisServerExtension.class)
class ClientCloseIT {

    private static final Duration BOUND = Duration.ofSeconds(15);

    @Test
    void closeReturnsAndCloseLaterCompletesWhenRedisAcceptsConnectionsAndNeverAnswers(RedisServer redis) {
        try (TcpProxy silent = TcpProxy.start(redis.host(), redis.port())) {
            silent.blackhole();
            FencedLockClient client = FencedLockClient.builder().redisUri("redis://" + silent.host() + ":" + silent.port())
                    .keyPrefix("close-" + UUID.randomUUID() + ":").build();
            client.acquire("silent").subscribe(lease -> { }, error -> { }); // a connection is being opened
            assertThatCode(client::close).doesNotThrowAnyException();
            StepVerifier.create(client.closeLater()).expectComplete().verify(BOUND);
            StepVerifier.create(client.acquire("after")).verifyError(LockClientClosedException.class);
            silent.resume();
        }
    }

    @Test
    void anAcquireWhoseFirstAttemptIsUnansweredWhenCloseBeginsEndsWithLockClientClosedException(RedisServer redis) {
        try (TcpProxy silent = TcpProxy.start(redis.host(), redis.port())) {
            FencedLockClient client = FencedLockClient.builder().redisUri("redis://" + silent.host() + ":" + silent.port())
                    .keyPrefix("close-" + UUID.randomUUID() + ":").build();
            StepVerifier.create(client.ping()).expectNextCount(1).verifyComplete(); // connected
            silent.blackhole();
            StepVerifier.create(client.acquire("unanswered"))
                    .expectSubscription()
                    .then(() -> client.closeLater().subscribe())
                    .verifyError(LockClientClosedException.class);
            silent.resume();
        }
    }

    @Test
    void closeRightAfterAWithLeaseScopeEndsReturnsAndReleasesTheLease(RedisServer redis) {
        String prefix = "close-" + UUID.randomUUID() + ":";
        for (int i = 0; i < 10; i++) {
            FencedLockClient client = FencedLockClient.builder().redisUri(redis.uri()).keyPrefix(prefix).build();
            Long first = client.withLease("ticking", lease -> Flux.interval(Duration.ofMillis(1))).take(1).blockLast(BOUND);
            assertThat(first).isZero();
            assertThatCode(client::close).as("close #" + i).doesNotThrowAnyException();
            assertThat(client.heldLeases()).isZero();
        }
        try (FencedLockClient next = FencedLockClient.builder().redisUri(redis.uri()).keyPrefix(prefix).build()) {
            StepVerifier.create(next.tryAcquire("ticking").flatMap(FencedLease::release))
                    .as("no lease was left behind").expectNext(ReleaseOutcome.RELEASED).expectComplete().verify(BOUND);
        }
    }

    @Test
    void closeReleasesEveryHeldLeaseSoAnotherClientGetsItAtOnce(RedisServer redis) {
        String prefix = "close-" + UUID.randomUUID() + ":";
        FencedLockClient holder = FencedLockClient.builder().redisUri(redis.uri()).keyPrefix(prefix)
                .leaseTime(Duration.ofSeconds(60)).build();
        for (String name : List.of("held-a", "held-b")) {
            assertThat(holder.acquire(name).block(BOUND)).isNotNull();
        }
        holder.close();
        try (FencedLockClient next = FencedLockClient.builder().redisUri(redis.uri()).keyPrefix(prefix).build()) {
            for (String name : List.of("held-a", "held-b")) {
                StepVerifier.create(next.tryAcquire(name).flatMap(FencedLease::release))
                        .as(name).expectNext(ReleaseOutcome.RELEASED).expectComplete().verify(BOUND);
            }
        }
    }
}
