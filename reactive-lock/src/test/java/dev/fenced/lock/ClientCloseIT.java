package dev.fenced.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;

import dev.fenced.testservices.RedisServer;
import dev.fenced.testservices.RedisServerExtension;
import dev.fenced.testservices.TcpProxy;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
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

    /**
     * A tail asked for while a renewal is in flight (Redis answering 900 ms late; lease 3 s, renewed every second),
     * then the client closed at once, as a shutdown right after a job's tick: close waits for the renewal and the
     * tail, so the lock stays taken for the whole tail (not only until the last renewal's expiry) and the tail ends.
     */
    @Test
    void aTailAskedForJustBeforeCloseIsWrittenAndItsMonoEnds(RedisServer redis) throws Exception {
        String prefix = "close-" + UUID.randomUUID() + ":";
        try (TcpProxy slow = TcpProxy.start(redis.host(), redis.port());
                FencedLockClient other = FencedLockClient.builder().redisUri(redis.uri()).keyPrefix(prefix).build()) {
            FencedLockClient client = FencedLockClient.builder().redisUri("redis://" + slow.host() + ":" + slow.port())
                    .keyPrefix(prefix).leaseTime(Duration.ofSeconds(3)).build();
            long start = System.nanoTime();
            FencedLease lease = client.acquire("tail").block(BOUND);
            assertThat(lease).isNotNull();
            slow.delayReplies(900);
            Thread.sleep(1_300); // a renewal (sent at about 1 s) is in flight until about 1.9 s

            CompletableFuture<ReleaseOutcome> tail = lease.releaseNoSoonerThan(Duration.ofSeconds(10)).toFuture();
            client.close();
            Thread.sleep(Math.max(0, 6_500 - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)));

            assertThat(tail).as("the tail ended").succeedsWithin(BOUND).isEqualTo(ReleaseOutcome.LEFT_TO_EXPIRE);
            StepVerifier.create(other.tryAcquire("tail")).as("taken 6.5 s after the grant, inside the 10 s tail")
                    .verifyComplete();
        }
    }
}
