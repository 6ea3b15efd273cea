package dev.fenced.lock;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import dev.fenced.lock.StoreEnvironmentsIT.Store;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.extension.TestExecutionExceptionHandler;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Flux;
import reactor.test.StepVerifier;

/**
 * The fleet view, holder labels and fenced force-release through the public API, on every store of the
 * environment matrix (Redis 7 and 6.2, Sentinel, Cluster; PostgreSQL at each pool default isolation level): two
 * clients stand for two instances. A failure names its store first.
 */
class FleetViewIT {

    private static final Duration BOUND = Duration.ofSeconds(30);

    @RegisterExtension
    static final TestExecutionExceptionHandler CELL_NAMES = (context, error) -> {
        throw new AssertionError(context.getDisplayName() + ": " + error.getMessage(), error);
    };

    private final List<AutoCloseable> toClose = new ArrayList<>();
    private final String prefix = "fleet-" + UUID.randomUUID().toString().substring(0, 8) + ":";

    @AfterEach
    void tearDown() throws Exception {
        Collections.reverse(toClose);
        for (AutoCloseable c : toClose) {
            c.close();
        }
    }

    @AfterAll
    static void stopServers() {
        for (Store store : Store.values()) {
            store.stop();
        }
    }

    static Stream<Store> stores() {
        return Stream.of(Store.values());
    }

    /** One store of each kind, for the test with many locks. */
    static Stream<Store> oneOfEachKind() {
        return Stream.of(Store.REDIS_7, Store.CLUSTER, Store.POSTGRES_READ_COMMITTED);
    }

    private FencedLockClient client(Store store, FencedLockClientBuilder builder) {
        return client(store, builder, prefix);
    }

    private FencedLockClient client(Store store, FencedLockClientBuilder builder, String keyPrefix) {
        FencedLockClient client = store.environment().target(builder, keyPrefix).keyPrefix(keyPrefix).build();
        toClose.add(client);
        return client;
    }

    private static void await(String what, BooleanSupplier condition) throws InterruptedException {
        long giveUp = System.nanoTime() + BOUND.toNanos();
        while (!condition.getAsBoolean()) {
            assertThat(System.nanoTime() - giveUp).as("waiting for: " + what).isNegative();
            Thread.sleep(10);
        }
    }

    @ParameterizedTest(name = "{0}, another instance sees the holder")
    @MethodSource("stores")
    void anotherInstanceSeesTheHolderWithItsTokenLabelAndRemainingTimeAndItsOwnWaiters(Store store) throws Exception {
        FencedLockClient a = client(store, FencedLockClient.builder().holderLabel("orders@web-1 (pid 7)"));
        FencedLockClient b = client(store, FencedLockClient.builder().holderLabel("orders@web-2 (pid 8)").maxWait(BOUND));
        FencedLease held = a.acquire("nightly-report").block(BOUND);
        assertThat(held).isNotNull();

        StepVerifier.create(b.locks("*"))
                .assertNext(lock -> {
                    assertThat(lock.name()).isEqualTo("nightly-report");
                    assertThat(lock.token()).isEqualTo(held.token());
                    assertThat(lock.holderLabel()).isEqualTo("orders@web-1 (pid 7)");
                    assertThat(lock.remaining()).isPositive().isLessThanOrEqualTo(FencedLockClientBuilder.DEFAULT_LEASE_TIME);
                    assertThat(lock.waiters()).isZero();
                })
                .verifyComplete();
        CompletableFuture<FencedLease> waiting = b.acquire("nightly-report").toFuture();
        await("b's acquire waits", () -> b.lock("nightly-report").block(BOUND).waiters() == 1);
        assertThat(a.lock("nightly-report").block(BOUND).waiters()).as("a knows of no waiter of its own").isZero();
        assertThat(b.lock("free-lock").blockOptional(BOUND)).isEmpty();

        StepVerifier.create(held.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();
        FencedLease next = waiting.get(BOUND.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
        StepVerifier.create(a.lock("nightly-report"))
                .assertNext(lock -> {
                    assertThat(lock.token()).isEqualTo(next.token()).isGreaterThan(held.token());
                    assertThat(lock.holderLabel()).isEqualTo("orders@web-2 (pid 8)");
                })
                .verifyComplete();
    }

    @ParameterizedTest(name = "{0}, labels are optional")
    @MethodSource("stores")
    void aClientWithoutALabelShowsNoneAndTheDefaultLabelNamesHostAndProcess(Store store) {
        FencedLockClient unlabelled = client(store, FencedLockClient.builder().noHolderLabel());
        FencedLockClient byDefault = client(store, FencedLockClient.builder());
        FencedLease one = byDefault.acquire("labelled").block(BOUND);
        assertThat(one).isNotNull();
        StepVerifier.create(one.release()).expectNext(ReleaseOutcome.RELEASED).verifyComplete();
        // A grant without a label after one with a label: the old label is not shown for the new holder.
        // Kept reachable: a lease that nothing references is released once collected.
        List<FencedLease> held = List.of(unlabelled.acquire("labelled").block(BOUND), byDefault.acquire("by-default").block(BOUND));
        assertThat(byDefault.lock("labelled").block(BOUND).holderLabel()).isNull();
        assertThat(unlabelled.lock("by-default").block(BOUND).holderLabel())
                .isEqualTo(FencedLockClientBuilder.defaultHolderLabel(null));
        assertThat(held).allMatch(FencedLease::isHeld);
    }

    @ParameterizedTest(name = "{0}, force-release")
    @MethodSource("stores")
    void forceReleaseBreaksTheHolderWhoseLeaseIsLostAndTheNextTokenIsAbove(Store store) throws Exception {
        FencedLockClient stalled = client(store, FencedLockClient.builder().holderLabel("batch@worker-3 (pid 42)")
                .leaseTime(Duration.ofSeconds(3)).renewalPeriod(Duration.ofMillis(200)).commandTimeout(Duration.ofSeconds(1)));
        List<String> observed = new CopyOnWriteArrayList<>();
        LockObserver recording = new LockObserver() {
            @Override
            public void forceReleased(String name, ForceReleaseResult.Outcome outcome, String reason) {
                observed.add(name + " " + outcome + " " + reason);
            }

            @Override
            public void fleetListed(long count) {
                observed.add("listed " + count);
            }
        };
        FencedLockClient operator = client(store, FencedLockClient.builder().observer(recording));
        Logger fenced = (Logger) LoggerFactory.getLogger("dev.fenced");
        ListAppender<ILoggingEvent> events = new ListAppender<>();
        events.start();
        fenced.addAppender(events);
        toClose.add(() -> fenced.detachAppender(events));
        FencedLease broken = stalled.acquire("invoice-run").block(BOUND);
        assertThat(broken).isNotNull();

        StepVerifier.create(operator.forceRelease("invoice-run", "on-call: ticket OPS-17, job hung"))
                .expectNext(new ForceReleaseResult("invoice-run", ForceReleaseResult.Outcome.RELEASED, broken.token(),
                        "batch@worker-3 (pid 42)", "on-call: ticket OPS-17, job hung"))
                .verifyComplete();
        StepVerifier.create(broken.lost())
                .assertNext(loss -> assertThat(loss.reason()).isEqualTo(LossReason.NOT_HELD))
                .verifyComplete();
        StepVerifier.create(operator.forceRelease("invoice-run", "again"))
                .expectNext(new ForceReleaseResult("invoice-run", ForceReleaseResult.Outcome.NOT_HELD, 0, null, "again"))
                .verifyComplete();
        FencedLease next = operator.acquire("invoice-run").block(BOUND);
        assertThat(next).isNotNull();
        assertThat(next.token()).as("the next grant's token").isGreaterThan(broken.token());
        StepVerifier.create(broken.release()).expectNext(ReleaseOutcome.NOT_HELD).verifyComplete();
        assertThat(next.isHeld()).as("the broken holder's late release took nothing").isTrue();

        // Breaking a lease of the client that breaks it: its own lease is lost at once, not at its next renewal.
        StepVerifier.create(operator.forceRelease("invoice-run", "self"))
                .expectNextMatches(r -> r.outcome() == ForceReleaseResult.Outcome.RELEASED && r.token() == next.token())
                .verifyComplete();
        assertThat(next.isHeld()).isFalse();
        StepVerifier.create(operator.locks("*").count()).expectNext(0L).verifyComplete();

        assertThat(observed).containsExactly("invoice-run RELEASED on-call: ticket OPS-17, job hung",
                "invoice-run NOT_HELD again", "invoice-run RELEASED self", "listed 0");
        assertThat(events.list).filteredOn(e -> e.getLevel() == Level.WARN)
                .extracting(ILoggingEvent::getFormattedMessage)
                .contains("Force-released lock 'invoice-run' (token " + broken.token()
                        + ", holder 'batch@worker-3 (pid 42)'): on-call: ticket OPS-17, job hung");
        assertThat(events.list).extracting(ILoggingEvent::getFormattedMessage)
                .as("owner ids are never logged").noneMatch(m -> m.contains(broken.ownerId()));
    }

    @ParameterizedTest(name = "{0}, a retried force-release of a token")
    @MethodSource("stores")
    void aRetriedForceReleaseOfATokenLeavesTheNextLegitimateHolderAlone(Store store) {
        FencedLockClient hung = client(store, FencedLockClient.builder().holderLabel("hung@w1"));
        FencedLockClient next = client(store, FencedLockClient.builder().holderLabel("healthy@w2"));
        FencedLockClient operator = client(store, FencedLockClient.builder().holderLabel("ops"));
        FencedLease broken = hung.acquire("job").block(BOUND);
        assertThat(broken).isNotNull();
        long token = operator.lock("job").block(BOUND).token();
        StepVerifier.create(operator.forceRelease("job", token, "alice: INC-1, job hung"))
                .expectNext(new ForceReleaseResult("job", ForceReleaseResult.Outcome.RELEASED, broken.token(), "hung@w1",
                        "alice: INC-1, job hung"))
                .verifyComplete();
        FencedLease healthy = next.acquire("job").block(BOUND);
        assertThat(healthy).isNotNull();

        StepVerifier.create(operator.forceRelease("job", token, "alice: INC-1, job hung"))
                .expectNext(new ForceReleaseResult("job", ForceReleaseResult.Outcome.NOT_HELD, 0, null,
                        "alice: INC-1, job hung"))
                .verifyComplete();
        assertThat(healthy.isHeld()).as("the next holder, after the retry").isTrue();
        StepVerifier.create(operator.lock("job").map(LockInfo::token)).expectNext(healthy.token()).verifyComplete();
    }

    @ParameterizedTest(name = "{0}, patterns stay inside the prefix")
    @MethodSource("stores")
    void patternsMatchOnlyNamesUnderTheClientsOwnPrefix(Store store) {
        FencedLockClient mine = client(store, FencedLockClient.builder());
        // A prefix that starts with this one: its keys start with this client's prefix too.
        FencedLockClient longer = client(store, FencedLockClient.builder(), prefix + "x");
        // Kept reachable: a lease that nothing references is released once collected.
        FencedLease own = mine.acquire("job:1").block(BOUND);
        List<FencedLease> held = List.of(longer.acquire("job:1").block(BOUND), longer.acquire("job:2").block(BOUND),
                mine.acquire("job_1").block(BOUND));

        assertThat(mine.locks("*").map(LockInfo::name).collectList().block(BOUND)).containsExactlyInAnyOrder("job:1", "job_1");
        assertThat(mine.locks("job:*").map(LockInfo::token).collectList().block(BOUND)).containsExactly(own.token());
        assertThat(mine.locks("job_*").map(LockInfo::name).collectList().block(BOUND)).containsExactly("job_1");
        assertThat(mine.locks("job?1").collectList().block(BOUND)).isEmpty();
        assertThat(longer.locks("*").count().block(BOUND)).isEqualTo(2);
        assertThat(held).allMatch(FencedLease::isHeld);
        assertThat(own.isHeld()).isTrue();
    }

    @ParameterizedTest(name = "{0}, 20,000 locks")
    @MethodSource("oneOfEachKind")
    void twentyThousandLocksAreEachListedOnceAndASlowSubscriberGetsThemOneByOne(Store store) {
        int count = 20_000;
        FencedLockClient holder = client(store, FencedLockClient.builder().leaseTime(Duration.ofMinutes(5)));
        FencedLockClient viewer = client(store, FencedLockClient.builder());
        // Kept reachable: a lease that nothing references is released once collected.
        List<FencedLease> held = Flux.range(0, count)
                .flatMap(i -> holder.tryAcquire("many:" + i), 128)
                .collectList()
                .block(Duration.ofMinutes(3));
        assertThat(held).hasSize(count);

        Set<String> seen = new HashSet<>();
        long listed = viewer.locks("many:*").doOnNext(lock -> seen.add(lock.name())).count().block(Duration.ofMinutes(2));
        assertThat(listed).as("listed").isEqualTo(count);
        assertThat(seen).as("distinct names").hasSize(count);

        StepVerifier.create(viewer.locks("many:*"), 1)
                .expectNextCount(1)
                .thenRequest(1)
                .expectNextCount(1)
                .thenCancel()
                .verify(BOUND);
        java.lang.ref.Reference.reachabilityFence(held);
    }
}
