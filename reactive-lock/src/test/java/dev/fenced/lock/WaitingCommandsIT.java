package dev.fenced.lock;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.testservices.RedisProcess;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * Waiting does not poll: behind a holder that keeps renewing, only the oldest waiter of a lock makes attempts,
 * so the commands Redis receives do not grow with the number of waiters. Counted by Redis itself
 * ({@code INFO commandstats}) on a server of the test's own.
 */
class WaitingCommandsIT {

    private static final Duration BOUND = Duration.ofSeconds(20);

    @Test
    void twentyWaitersBehindARenewingHolderCostAboutWhatOneDoes() throws Exception {
        try (RedisProcess redis = RedisProcess.start();
                FencedLockClient holderClient = FencedLockClient.builder().redisUri(redis.uri())
                        .leaseTime(Duration.ofSeconds(1)).build();
                FencedLockClient waiterClient = FencedLockClient.builder().redisUri(redis.uri())
                        .leaseTime(Duration.ofSeconds(1)).maxWait(BOUND).build()) {
            FencedLease holder = holderClient.acquire("busy").block(BOUND);
            assertThat(holder).isNotNull();
            // The waiter client's connection opens before the waiters start: a first attempt that waits for the
            // connect could be sent after a later one's, which would then join the line first.
            waiterClient.acquire("warm-up").flatMap(FencedLease::release).block(BOUND);
            List<CompletableFuture<FencedLease>> waiting = new ArrayList<>();
            for (int i = 0; i < 20; i++) {
                waiting.add(waiterClient.acquire("busy").toFuture());
                Thread.sleep(20); // one by one, so each later waiter finds the line and joins it
            }
            Thread.sleep(1_000); // every waiter has joined and listens
            long before = scriptCalls(redis);
            Thread.sleep(3_000);
            long calls = scriptCalls(redis) - before;
            // The holder renews every third of its 1 s lease (about 9 calls in 3 s); the head waiter attempts about
            // once per holder lease (about 3). Twenty waiters attempting each on their own timer made 60 more.
            assertThat(calls).as("script calls in 3 s").isLessThanOrEqualTo(20);
            assertThat(waiting).noneMatch(CompletableFuture::isDone);
            holder.release().block(BOUND);
            assertThat(waiting.get(0).get(BOUND.toSeconds(), java.util.concurrent.TimeUnit.SECONDS).isHeld()).isTrue();
        }
    }

    private static long scriptCalls(RedisProcess redis) {
        String stats = String.valueOf(redis.call("INFO", "commandstats"));
        long calls = 0;
        for (String line : stats.split("\r?\n")) {
            if (line.startsWith("cmdstat_evalsha:") || line.startsWith("cmdstat_eval:")) {
                String field = line.substring(line.indexOf("calls=") + "calls=".length());
                calls += Long.parseLong(field.substring(0, field.indexOf(',')));
            }
        }
        return calls;
    }
}
