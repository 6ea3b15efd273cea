package dev.fenced.lock;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.testservices.RedisServer;
import dev.fenced.testservices.RedisServerExtension;
import java.time.Duration;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.blockhound.BlockingOperationError;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.test.StepVerifier;

/** Proves that BlockHound is active for the suite, on Reactor's and on Lettuce's threads. */
@ExtendWith(RedisServerExtension.class)
class BlockHoundIT {

    private FencedLockClient client;

    @BeforeEach
    void connect(RedisServer redis) {
        client = FencedLockClient.builder().redisUri(redis.uri()).keyPrefix("bh-" + UUID.randomUUID() + ":").build();
    }

    @AfterEach
    void close() {
        client.close();
    }

    @Test
    void blockingOnAReactorThreadIsDetected() {
        StepVerifier.create(Mono.fromCallable(() -> {
                    Thread.sleep(1);
                    return 1;
                }).subscribeOn(Schedulers.parallel()))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(BlockingOperationError.class));
    }

    @Test
    void blockingWhereTheLeaseIsDeliveredIsDetected() {
        StepVerifier.create(client.acquire("blocking").map(lease -> {
                    sleep();
                    return lease.token();
                }))
                .expectErrorSatisfies(e -> assertThat(e).isInstanceOf(BlockingOperationError.class))
                .verify(Duration.ofSeconds(10));
    }

    private static void sleep() {
        try {
            Thread.sleep(1);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
