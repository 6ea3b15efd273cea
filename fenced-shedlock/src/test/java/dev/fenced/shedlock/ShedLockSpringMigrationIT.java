package dev.fenced.shedlock;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.testservices.RedisServer;
import dev.fenced.testservices.RedisServerExtension;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import net.javacrumbs.shedlock.core.LockAssert;
import net.javacrumbs.shedlock.core.LockProvider;
import net.javacrumbs.shedlock.spring.annotation.EnableSchedulerLock;
import net.javacrumbs.shedlock.spring.annotation.SchedulerLock;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.scheduling.annotation.EnableScheduling;
import org.springframework.scheduling.annotation.Scheduled;

/**
 * The README's migration table, literally: a ShedLock application ({@code @EnableScheduling},
 * {@code @EnableSchedulerLock}, {@code @Scheduled} with {@code @SchedulerLock}) switches to Fenced by replacing its
 * {@code LockProvider} bean. Two application contexts stand for two instances on one Redis.
 */
@ExtendWith(RedisServerExtension.class)
final class ShedLockSpringMigrationIT {

    static String redisUri;
    static String keyPrefix;
    static final AtomicInteger running = new AtomicInteger();
    static final AtomicInteger runs = new AtomicInteger();
    static final AtomicInteger overlaps = new AtomicInteger();
    static final List<Long> tokens = new CopyOnWriteArrayList<>();
    static final List<Throwable> failures = new CopyOnWriteArrayList<>();
    /**
     * Set once the test has seen its runs and the contexts start to close: Spring stops scheduling then but does not
     * wait for a run in progress, which may meet its lock client closed under it (its lease gone); not the migration's
     * failure.
     */
    static volatile boolean closing;

    @Configuration
    @EnableScheduling
    @EnableSchedulerLock(defaultLockAtMostFor = "PT10M")
    static class App {

        @Bean(destroyMethod = "close")
        FencedLockClient fencedLockClient() {
            return FencedLockClient.builder().redisUri(redisUri).keyPrefix(keyPrefix).build();
        }

        @Bean
        LockProvider lockProvider(FencedLockClient locks) {
            return FencedLockProvider.builder(locks).lockNamePrefix("prod:").build();
        }

        @Bean
        Job job() {
            return new Job();
        }
    }

    static class Job {

        @Scheduled(fixedDelay = 5)
        @SchedulerLock(name = "report", lockAtMostFor = "PT5M", lockAtLeastFor = "PT0S")
        public void report() {
            try {
                LockAssert.assertLocked();
                FencedLease lease = FencedLockProvider.currentLease("report").orElseThrow();
                tokens.add(lease.token());
                if (running.incrementAndGet() > 1) {
                    overlaps.incrementAndGet();
                }
                Thread.yield();
                running.decrementAndGet();
                runs.incrementAndGet();
            } catch (Throwable t) {
                if (!closing) {
                    failures.add(t);
                }
            }
        }
    }

    @Test
    void aShedLockApplicationRunsItsJobsOnFencedByReplacingTheProviderBean(RedisServer redis) throws Exception {
        redisUri = redis.uri();
        keyPrefix = "shedlock-spring-" + UUID.randomUUID() + ":";
        closing = false;
        try (AnnotationConfigApplicationContext one = new AnnotationConfigApplicationContext(App.class);
                AnnotationConfigApplicationContext two = new AnnotationConfigApplicationContext(App.class)) {
            LockProviderContract.await("ten runs of the job", () -> runs.get() >= 10);
            closing = true;
        }
        assertThat(failures).isEmpty();
        assertThat(overlaps.get()).isZero();
        assertThat(tokens).isSorted().doesNotHaveDuplicates();
    }
}
