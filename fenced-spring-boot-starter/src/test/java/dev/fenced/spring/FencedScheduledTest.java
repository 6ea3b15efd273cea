package dev.fenced.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.test.FencedLockTestKit;
import dev.fenced.lock.test.FencedLockTestKitConfiguration;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.scheduling.annotation.EnableScheduling;
import org.springframework.scheduling.annotation.Scheduled;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.test.StepVerifier;

/**
 * {@link FencedScheduled} in a Spring context on the test kit's in-memory client: the start-up errors, placeholders
 * and the name prefix, and calls through the proxy (the schedules themselves are a day away, so the test makes the
 * calls).
 */
class FencedScheduledTest {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(FencedLockAutoConfiguration.class, FencedScheduledAutoConfiguration.class))
            .withUserConfiguration(FencedLockTestKitConfiguration.class)
            .withPropertyValues("fenced.redis-uri=");

    @Configuration(proxyBeanMethods = false)
    @EnableScheduling
    static class Jobs {

        @Bean
        Tally tally() {
            return new Tally();
        }

        @Bean
        Reports reports(Tally tally) {
            return new Reports(tally);
        }
    }

    /** What the jobs did; a bean of its own, since the proxy of Reports has no state. */
    static final class Tally {

        final AtomicInteger reactiveRuns = new AtomicInteger();
        final AtomicInteger plainRuns = new AtomicInteger();
        final List<String> threads = new CopyOnWriteArrayList<>();
        final List<Long> tokens = new CopyOnWriteArrayList<>();
        volatile CountDownLatch plainMayEnd = new CountDownLatch(0);
        volatile CountDownLatch plainStarted = new CountDownLatch(1);
        final AtomicInteger interrupted = new AtomicInteger();
    }

    static class Reports {

        private final Tally tally;

        Reports(Tally tally) {
            this.tally = tally;
        }

        @Scheduled(fixedDelay = 1, timeUnit = TimeUnit.DAYS, initialDelay = 1)
        @FencedScheduled(name = "${report.name:reactive}", lockAtMostFor = "${report.at-most:10s}", lockAtLeastFor = "2s")
        Mono<Void> reactive() {
            return FencedLease.current().doOnNext(lease -> tally.tokens.add(lease.token()))
                    .then(Mono.fromRunnable(tally.reactiveRuns::incrementAndGet));
        }

        @Scheduled(fixedDelay = 1, timeUnit = TimeUnit.DAYS, initialDelay = 1)
        @FencedScheduled(name = "plain", lockAtMostFor = "10s")
        void plain() throws InterruptedException {
            tally.threads.add(Thread.currentThread().getName());
            tally.plainRuns.incrementAndGet();
            tally.plainStarted.countDown();
            tally.plainMayEnd.await();
        }

        @Scheduled(fixedDelay = 1, timeUnit = TimeUnit.DAYS, initialDelay = 1)
        @FencedScheduled(name = "overrun", lockAtMostFor = "1s") // time for its task to start, on a loaded machine too
        void overrun() {
            try {
                Thread.sleep(60_000);
            } catch (InterruptedException e) {
                tally.interrupted.incrementAndGet();
            }
        }

        @Scheduled(fixedDelay = 1, timeUnit = TimeUnit.DAYS, initialDelay = 1)
        @FencedScheduled(name = "failing", lockAtMostFor = "10s")
        void failing() {
            throw new IllegalStateException("report failed");
        }
    }

    @Test
    void aReactiveMethodRunsUnderTheLockNamedWithThePrefixAndKeepsItAtLeastFor() {
        runner.withUserConfiguration(Jobs.class)
                .withPropertyValues("fenced.jobs.name-prefix=job:", "report.name=daily")
                .run(context -> {
                    assertThat(context).hasNotFailed();
                    Reports reports = context.getBean(Reports.class);
                    Tally tally = context.getBean(Tally.class);
                    FencedLockTestKit kit = context.getBean(FencedLockTestKit.class);
                    Mono<Void> ticks = reports.reactive();

                    StepVerifier.create(ticks).expectComplete().verify(Duration.ofSeconds(10));
                    StepVerifier.create(ticks).expectComplete().verify(Duration.ofSeconds(10));

                    assertThat(tally.reactiveRuns).as("the second tick is skipped during lockAtLeastFor").hasValue(1);
                    assertThat(kit.issuedTokens("job:daily")).containsExactlyElementsOf(tally.tokens);
                    assertThat(kit.holder("job:daily")).as("kept at least 2 s").isPresent();
                });
    }

    @Test
    void aPlainMethodRunsOffTheCallingThreadAndAnOverlappingCallIsSkipped() {
        runner.withUserConfiguration(Jobs.class).run(context -> {
            Reports reports = context.getBean(Reports.class);
            Tally tally = context.getBean(Tally.class);
            tally.plainMayEnd = new CountDownLatch(1);
            CompletableFuture<Void> first = CompletableFuture.runAsync(() -> {
                try {
                    reports.plain();
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            });
            assertThat(tally.plainStarted.await(10, TimeUnit.SECONDS)).isTrue();

            reports.plain(); // skipped at once: the first call still runs

            tally.plainMayEnd.countDown();
            first.get(10, TimeUnit.SECONDS);
            assertThat(tally.plainRuns).hasValue(1);
            assertThat(tally.threads).singleElement().asString().startsWith("boundedElastic-");
            reports.plain();
            assertThat(tally.plainRuns).as("runs again once the first has released").hasValue(2);
        });
    }

    @Test
    void aPlainMethodIsInterruptedAtLockAtMostForAndTheCallReturnsOnceItHasEnded() {
        runner.withUserConfiguration(Jobs.class).run(context -> {
            Reports reports = context.getBean(Reports.class);
            Tally tally = context.getBean(Tally.class);

            reports.overrun();

            assertThat(tally.interrupted).as("interrupted at the cap, and ended before the call returned").hasValue(1);
            // The release is sent as the loss is signalled, so it may still be on its way when the call returns.
            FencedLockTestKit kit = context.getBean(FencedLockTestKit.class);
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (kit.holder("overrun").isPresent() && System.nanoTime() - until < 0) {
                Thread.sleep(5);
            }
            assertThat(kit.holder("overrun")).as("released at the cap").isEmpty();
        });
    }

    static final AtomicInteger stubbornRunning = new AtomicInteger();
    static final AtomicInteger stubbornMostAtOnce = new AtomicInteger();
    static volatile CountDownLatch stubbornStarted = new CountDownLatch(1);

    static class Stubborn {
        /** Ignores interruption for 3 s, as much blocking code does (a JDBC call, a busy loop). */
        @Scheduled(fixedDelay = 1, timeUnit = TimeUnit.DAYS, initialDelay = 1)
        @Scheduled(fixedDelay = 1, timeUnit = TimeUnit.DAYS, initialDelay = 2)
        @FencedScheduled(name = "stubborn", lockAtMostFor = "1s")
        public void run() {
            stubbornMostAtOnce.accumulateAndGet(stubbornRunning.incrementAndGet(), Math::max);
            stubbornStarted.countDown();
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
            while (System.nanoTime() - until < 0) {
                Thread.onSpinWait();
                Thread.interrupted();
            }
            stubbornRunning.decrementAndGet();
        }
    }

    /**
     * Once its tick is cut off, a plain method that ignores interruption runs on without the lock: a second trigger
     * (two schedules on the method, or another caller) in the same instance is skipped until it has returned.
     */
    @Test
    void aPlainMethodStillRunningAfterItsCutOffIsNotStartedAgainInTheSameInstance() {
        stubbornRunning.set(0);
        stubbornMostAtOnce.set(0);
        stubbornStarted = new CountDownLatch(1);
        runner.withUserConfiguration(SchedulingOnly.class).withBean("job", Stubborn.class).run(context -> {
            assertThat(context).hasNotFailed();
            Stubborn job = context.getBean(Stubborn.class);
            CompletableFuture<Void> first = CompletableFuture.runAsync(job::run);
            assertThat(stubbornStarted.await(10, TimeUnit.SECONDS)).isTrue();
            Thread.sleep(1_500); // past lockAtMostFor: the first tick is cut off and its lock released; its method runs on
            assertThat(context.getBean(FencedLockTestKit.class).holder("stubborn")).as("released at the cap").isEmpty();
            CompletableFuture<Void> second = CompletableFuture.runAsync(job::run);
            second.get(20, TimeUnit.SECONDS);
            first.get(20, TimeUnit.SECONDS);
            assertThat(stubbornMostAtOnce).as("copies of the method running at once in one instance").hasValue(1);
        });
    }

    static final AtomicInteger queuedRuns = new AtomicInteger();

    static class Queued {
        @Scheduled(fixedDelay = 1, timeUnit = TimeUnit.DAYS, initialDelay = 1)
        @FencedScheduled(name = "queued", lockAtMostFor = "300ms")
        public void run() {
            queuedRuns.incrementAndGet();
        }
    }

    /**
     * A plain method whose boundedElastic task is still queued when its tick is cut off (every boundedElastic thread
     * busy) is never started: the lock it would run under has been released.
     */
    @Test
    void aPlainMethodCutOffBeforeItsTaskStartedIsNotRunAfterTheLockWasReleased() {
        queuedRuns.set(0);
        runner.withUserConfiguration(SchedulingOnly.class).withBean("job", Queued.class).run(context -> {
            assertThat(context).hasNotFailed();
            CountDownLatch busy = new CountDownLatch(1);
            reactor.core.Disposable.Composite blockers = reactor.core.Disposables.composite();
            try {
                for (int i = 0; i < Schedulers.DEFAULT_BOUNDED_ELASTIC_SIZE; i++) {
                    blockers.add(Schedulers.boundedElastic().schedule(() -> {
                        try {
                            busy.await();
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    }));
                }
                CompletableFuture<Void> tick = CompletableFuture.runAsync(context.getBean(Queued.class)::run);
                Thread.sleep(1_000); // past lockAtMostFor: the tick is cut off and its lock released, its task queued
                assertThat(context.getBean(FencedLockTestKit.class).holder("queued")).as("released at the cap").isEmpty();
                busy.countDown(); // boundedElastic frees up: the queued task starts
                tick.get(20, TimeUnit.SECONDS);
            } finally {
                busy.countDown();
                blockers.dispose();
            }
            assertThat(queuedRuns).as("runs of the method after its lock was released").hasValue(0);
        });
    }

    @Test
    void aFailingPlainMethodPropagatesItsErrorAndReleasesTheLock() {
        runner.withUserConfiguration(Jobs.class).run(context -> {
            Reports reports = context.getBean(Reports.class);
            assertThatThrownBy(reports::failing).isInstanceOf(IllegalStateException.class).hasMessage("report failed");
            assertThat(context.getBean(FencedLockTestKit.class).holder("failing")).isEmpty();
        });
    }

    @Test
    void aPlainMethodCalledOnANonBlockingThreadFailsAtOnce() {
        runner.withUserConfiguration(Jobs.class).run(context -> {
            Reports reports = context.getBean(Reports.class);
            Tally tally = context.getBean(Tally.class);
            java.util.concurrent.atomic.AtomicReference<Throwable> error = new java.util.concurrent.atomic.AtomicReference<>();
            Mono.fromRunnable(() -> {
                        try {
                            reports.plain();
                        } catch (Throwable e) {
                            error.set(e);
                        }
                    })
                    .subscribeOn(Schedulers.parallel())
                    .block(Duration.ofSeconds(10));
            assertThat(error.get()).isInstanceOf(IllegalStateException.class).hasMessageStartingWith("@FencedScheduled "
                    + "method reports.plain blocks until its job ends, but was called on a non-blocking thread (parallel-");
            assertThat(tally.plainRuns).hasValue(0);
        });
    }

    @Configuration(proxyBeanMethods = false)
    @EnableScheduling
    static class NotScheduled {
        @Bean
        Object notScheduled() {
            return new Object() {
                @FencedScheduled(name = "x", lockAtMostFor = "10s")
                public void run() {
                }
            };
        }
    }

    static class AtLeastLonger {
        @Scheduled(fixedDelay = 1, timeUnit = TimeUnit.DAYS, initialDelay = 1)
        @FencedScheduled(name = "x", lockAtMostFor = "10s", lockAtLeastFor = "1m")
        void run() {
        }
    }

    static class BlankName {
        @Scheduled(fixedDelay = 1, timeUnit = TimeUnit.DAYS, initialDelay = 1)
        @FencedScheduled(name = "${blank:}", lockAtMostFor = "10s")
        void run() {
        }
    }

    static class BadName {
        @Scheduled(fixedDelay = 1, timeUnit = TimeUnit.DAYS, initialDelay = 1)
        @FencedScheduled(name = "a{b}", lockAtMostFor = "10s")
        void run() {
        }
    }

    static class BadDuration {
        @Scheduled(fixedDelay = 1, timeUnit = TimeUnit.DAYS, initialDelay = 1)
        @FencedScheduled(name = "x", lockAtMostFor = "ten seconds")
        void run() {
        }
    }

    static class FinalMethod {
        @Scheduled(fixedDelay = 1, timeUnit = TimeUnit.DAYS, initialDelay = 1)
        @FencedScheduled(name = "x", lockAtMostFor = "10s")
        public final void run() {
        }
    }

    static class PrivateMethod {
        @Scheduled(fixedDelay = 1, timeUnit = TimeUnit.DAYS, initialDelay = 1)
        @FencedScheduled(name = "x", lockAtMostFor = "10s")
        private void run() {
        }
    }

    static class ReturnsAValue {
        @Scheduled(fixedDelay = 1, timeUnit = TimeUnit.DAYS, initialDelay = 1)
        @FencedScheduled(name = "x", lockAtMostFor = "10s")
        public int run() {
            return 42;
        }
    }

    private void failsToStart(Class<?> job, String message) {
        runner.withUserConfiguration(SchedulingOnly.class).withBean("job", job).run(context -> {
            assertThat(context).hasFailed();
            Throwable failure = context.getStartupFailure();
            while (failure != null && !(failure instanceof FencedScheduledException)) {
                failure = failure.getCause();
            }
            assertThat(failure).isInstanceOf(FencedScheduledException.class).hasMessage(message);
            assertThat(((FencedScheduledException) failure).beanName()).isEqualTo("job");
            assertThat(((FencedScheduledException) failure).method()).isEqualTo(job.getSimpleName() + ".run()");
        });
    }

    @Configuration(proxyBeanMethods = false)
    @EnableScheduling
    static class SchedulingOnly {
    }

    @Test
    void lockAtLeastForLongerThanLockAtMostForStopsTheStartUp() {
        failsToStart(AtLeastLonger.class, "@FencedScheduled method AtLeastLonger.run() of bean 'job': lockAtLeastFor (PT1M) "
                + "must not be longer than lockAtMostFor (PT10S)");
    }

    @Test
    void aBlankNameStopsTheStartUp() {
        failsToStart(BlankName.class, "@FencedScheduled method BlankName.run() of bean 'job': name must not be blank");
    }

    @Test
    void aNameTheLockRefusesStopsTheStartUp() {
        failsToStart(BadName.class, "@FencedScheduled method BadName.run() of bean 'job': Lock name must not contain "
                + "braces, was 'a{b}'");
    }

    @Test
    void aDurationThatDoesNotParseStopsTheStartUp() {
        failsToStart(BadDuration.class, "@FencedScheduled method BadDuration.run() of bean 'job': lockAtMostFor 'ten seconds' "
                + "is not a duration (use a Spring Boot duration such as 30s, 5m or PT5M)");
    }

    /** The CGLIB proxy cannot intercept a final (or private, or static) method: each call would run with no lock. */
    @Test
    void aFinalMethodStopsTheStartUp() {
        failsToStart(FinalMethod.class, "@FencedScheduled method FinalMethod.run() of bean 'job': it is final, so the "
                + "proxy cannot run it under its lock (each call would run unguarded); make it a non-final, non-private "
                + "instance method");
    }

    @Test
    void aPrivateMethodStopsTheStartUp() {
        failsToStart(PrivateMethod.class, "@FencedScheduled method PrivateMethod.run() of bean 'job': it is private, so "
                + "the proxy cannot run it under its lock (each call would run unguarded); make it a non-final, "
                + "non-private instance method");
    }

    /** A skipped or cut-off tick has no value to return (a primitive would fail in the proxy): only void. */
    @Test
    void aPlainMethodReturningAValueStopsTheStartUp() {
        failsToStart(ReturnsAValue.class, "@FencedScheduled method ReturnsAValue.run() of bean 'job': it returns int; a "
                + "plain @FencedScheduled method returns void (a reactive one Mono, Flux or Publisher)");
    }

    @Test
    void aMethodThatIsNotScheduledStopsTheStartUp() {
        runner.withUserConfiguration(NotScheduled.class).run(context -> {
            assertThat(context).hasFailed();
            assertThat(context.getStartupFailure()).rootCause().isInstanceOf(FencedScheduledException.class)
                    .hasMessageContaining("of bean 'notScheduled': it is not @Scheduled, so nothing runs it as a job; add "
                            + "@Scheduled (and @EnableScheduling)");
        });
    }

    @Test
    void withoutSchedulingNothingIsProxied() {
        runner.withBean("job", AtLeastLonger.class).run(context -> {
            assertThat(context).hasNotFailed().doesNotHaveBean(FencedScheduledPostProcessor.class);
        });
    }

    @Test
    void theNamePrefixIsInTheConfigurationMetadata() throws Exception {
        try (var in = getClass().getResourceAsStream("/META-INF/spring-configuration-metadata.json")) {
            assertThat(in).isNotNull();
            assertThat(new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8)).contains("\"fenced.jobs.name-prefix\"");
        }
    }
}
