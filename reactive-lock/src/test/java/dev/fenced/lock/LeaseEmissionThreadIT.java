package dev.fenced.lock;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.testservices.RedisServer;
import dev.fenced.testservices.RedisServerExtension;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import java.time.Duration;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * README, Threads: "an acquired lease is emitted on the thread that received the grant (Lettuce's I/O thread)",
 * never inside the caller's {@code subscribe()}, however fast Redis answers. Sequential uncontended acquires and
 * releases from the test thread, on a client of Fenced's own and on a client given a user's {@link RedisClient}:
 * the lease and the release's outcome must both arrive on a Lettuce thread. (An asynchronous-API script path
 * registered its callback after sending, and a reply that came first was emitted on the caller's thread.)
 */
@ExtendWith(RedisServerExtension.class)
class LeaseEmissionThreadIT {

    private static final int PAIRS = 500;

    @Test
    void leasesAndReleasesOfAnOwnClientArriveOnLettucesThread(RedisServer redis) {
        try (FencedLockClient client = FencedLockClient.builder().redisUri(redis.uri()).keyPrefix(prefix()).build()) {
            assertEmittedOffTheCaller(client);
        }
    }

    @Test
    void leasesAndReleasesOfAGivenLettuceClientArriveOnLettucesThread(RedisServer redis) {
        RedisClient lettuce = RedisClient.create();
        try (FencedLockClient client = FencedLockClient.builder().redisClient(lettuce, RedisURI.create(redis.uri()))
                .keyPrefix(prefix()).build()) {
            assertEmittedOffTheCaller(client);
        } finally {
            lettuce.shutdown();
        }
    }

    private static String prefix() {
        return "emission-" + UUID.randomUUID() + ":";
    }

    private static void assertEmittedOffTheCaller(FencedLockClient client) {
        client.ping().block(Duration.ofSeconds(10));
        String caller = Thread.currentThread().getName();
        Set<String> leaseThreads = ConcurrentHashMap.newKeySet();
        Set<String> releaseThreads = ConcurrentHashMap.newKeySet();
        for (int i = 0; i < PAIRS; i++) {
            client.acquire("emission")
                    .doOnNext(lease -> leaseThreads.add(Thread.currentThread().getName()))
                    .flatMap(FencedLease::release)
                    .doOnSuccess(released -> releaseThreads.add(Thread.currentThread().getName()))
                    .block(Duration.ofSeconds(10));
        }
        Function<Set<String>, Set<String>> callers = threads -> threads.stream().filter(caller::equals)
                .collect(java.util.stream.Collectors.toSet());
        assertThat(callers.apply(leaseThreads)).as("leases emitted on the caller's thread (all: %s)", leaseThreads).isEmpty();
        assertThat(callers.apply(releaseThreads)).as("releases answered on the caller's thread (all: %s)", releaseThreads)
                .isEmpty();
        assertThat(leaseThreads).allMatch(name -> name.startsWith("lettuce-"), "Lettuce threads");
    }
}
