package dev.fenced.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.JobOutcome;
import dev.fenced.lock.LockObserver;
import dev.fenced.testservices.RedisServer;
import dev.fenced.testservices.RedisServerExtension;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.scheduling.annotation.EnableScheduling;
import org.springframework.scheduling.annotation.Scheduled;
import reactor.core.publisher.Mono;

/**
 * {@link FencedScheduled} methods scheduled by Spring in two application contexts on one Redis (two instances): each
 * job runs once across both while its lockAtLeastFor lasts, every other tick is skipped, and a lock server that is
 * down skips ticks without stopping the schedule.
 */
@ExtendWith(RedisServerExtension.class)
class FencedScheduledIT {

    private static final Duration BOUND = Duration.ofSeconds(30);

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(FencedLockAutoConfiguration.class, FencedScheduledAutoConfiguration.class))
            .withUserConfiguration(Jobs.class);

    @Configuration(proxyBeanMethods = false)
    @EnableScheduling
    static class Jobs {

        @Bean
        Outcomes outcomes() {
            return new Outcomes();
        }

        @Bean
        LockObserver recordingObserver(Outcomes outcomes) {
            return new LockObserver() {
                @Override
                public JobObservation jobStarted(String job) {
                    return outcomes.all::add;
                }
            };
        }

        @Bean
        Ticks ticks(Outcomes outcomes) {
            return new Ticks(outcomes);
        }
    }

    /** The outcomes of one context's ticks, and how often each job's body ran there. */
    static final class Outcomes {

        final List<JobOutcome> all = new CopyOnWriteArrayList<>();
        final AtomicInteger reactiveRuns = new AtomicInteger();
        final AtomicInteger plainRuns = new AtomicInteger();

        long count(String job, JobOutcome.Status status) {
            return all.stream().filter(o -> o.job().equals(job) && o.status() == status).count();
        }
    }

    static class Ticks {

        private final Outcomes outcomes;

        Ticks(Outcomes outcomes) {
            this.outcomes = outcomes;
        }

        @Scheduled(fixedRate = 100)
        @FencedScheduled(name = "reactive", lockAtMostFor = "60s", lockAtLeastFor = "${test.at-least:60s}")
        Mono<Void> reactive() {
            return Mono.fromRunnable(outcomes.reactiveRuns::incrementAndGet);
        }

        @Scheduled(fixedRate = 100)
        @FencedScheduled(name = "plain", lockAtMostFor = "60s", lockAtLeastFor = "${test.at-least:60s}")
        void plain() {
            outcomes.plainRuns.incrementAndGet();
        }
    }

    private static void await(String what, BooleanSupplier condition) throws InterruptedException {
        long giveUp = System.nanoTime() + BOUND.toNanos();
        while (!condition.getAsBoolean()) {
            assertThat(System.nanoTime() - giveUp).as("waiting for: " + what).isNegative();
            Thread.sleep(20);
        }
    }

    @Test
    void eachJobRunsOnceAcrossTwoInstancesAndTheirOtherTicksAreSkipped(RedisServer redis) {
        String prefix = "scheduled-" + UUID.randomUUID() + ":";
        ApplicationContextRunner instance = runner.withPropertyValues("fenced.redis-uri=" + redis.uri(),
                "fenced.key-prefix=" + prefix, "fenced.jobs.name-prefix=job:");
        instance.run(one -> instance.run(two -> {
            Outcomes a = one.getBean(Outcomes.class);
            Outcomes b = two.getBean(Outcomes.class);
            for (String job : List.of("job:reactive", "job:plain")) {
                await(job + " skipped a few times in both instances",
                        () -> a.count(job, JobOutcome.Status.SKIPPED) >= 3 && b.count(job, JobOutcome.Status.SKIPPED) >= 3);
                assertThat(a.count(job, JobOutcome.Status.RAN) + b.count(job, JobOutcome.Status.RAN)).as(job + " ran once")
                        .isEqualTo(1);
            }
            assertThat(a.reactiveRuns.get() + b.reactiveRuns.get()).isEqualTo(1);
            assertThat(a.plainRuns.get() + b.plainRuns.get()).isEqualTo(1);
            assertThat(a.all).noneMatch(o -> o.status() == JobOutcome.Status.FAILED || o.status() == JobOutcome.Status.UNAVAILABLE);
        }));
    }

    @Test
    void aLockServerThatIsDownSkipsTicksAndTheScheduleGoesOn() {
        runner.withPropertyValues("fenced.redis-uri=redis://127.0.0.1:1", "fenced.lease-time=3s").run(context -> {
            Outcomes outcomes = context.getBean(Outcomes.class);
            await("ticks skipped for the lock server being down",
                    () -> outcomes.count("reactive", JobOutcome.Status.UNAVAILABLE) >= 3
                            && outcomes.count("plain", JobOutcome.Status.UNAVAILABLE) >= 3);
            assertThat(outcomes.reactiveRuns.get() + outcomes.plainRuns.get()).isZero();
            assertThat(outcomes.all).allSatisfy(o -> assertThat(o.reason()).startsWith("the lock could not be taken: "));
        });
    }
}
