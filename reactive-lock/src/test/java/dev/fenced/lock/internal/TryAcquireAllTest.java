package dev.fenced.lock.internal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLeaseBatch;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.LockClientClosedException;
import dev.fenced.lock.LockServiceException;
import dev.fenced.lock.LossReason;
import dev.fenced.lock.ReleaseOutcome;
import dev.fenced.lock.internal.memory.InMemoryLeaseStore;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/** Batches of single attempts ({@code tryAcquireAll}) in virtual time, over the in-memory store. */
class TryAcquireAllTest {

    private static final Duration BOUND = Duration.ofSeconds(1);

    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();
    private final InMemoryLeaseStore memory = new InMemoryLeaseStore(clock);
    private final CountingLeaseStore store = new CountingLeaseStore(memory);
    private final List<LeasingLockClient> clients = new ArrayList<>();
    private final LeasingLockClient client = client(store);

    private LeasingLockClient client(LeaseStore over) {
        LeasingLockClient c = LeasingLockClient.create(over,
                ClientSettings.of("test:", Duration.ofSeconds(3), null, Duration.ofSeconds(10), null, clock));
        clients.add(c);
        return c;
    }

    @AfterEach
    void tearDown() {
        clients.forEach(c -> c.closeLater().subscribe());
        clock.advanceTimeBy(Duration.ofSeconds(30));
        clock.dispose();
    }

    private boolean heldInStore(String name) {
        return memory.lock(name).blockOptional(BOUND).isPresent();
    }

    @Test
    void oneStoreCallGrantsEveryFreeNameItsOwnLeaseAndReportsTheBusyOnes() {
        FencedLease holder = client.tryAcquire("b").block(BOUND);
        assertThat(holder).isNotNull();
        FencedLeaseBatch batch = client.tryAcquireAll(List.of("a", "b", "c")).block(BOUND);
        assertThat(batch).isNotNull();
        assertThat(store.acquireAlls).as("one store call for the batch").hasValue(1);
        assertThat(batch.busy()).containsExactly("b");
        assertThat(batch.leases()).extracting(FencedLease::name).containsExactly("a", "c");
        assertThat(batch.lease("b")).isNull();
        FencedLease a = batch.lease("a");
        FencedLease c = batch.lease("c");
        assertThat(a).isNotNull();
        assertThat(c).isNotNull();
        assertThat(a.ownerId()).isNotEqualTo(c.ownerId());
        assertThat(memory.lock("a").block(BOUND).token()).isEqualTo(a.token());
        assertThat(memory.lock("c").block(BOUND).token()).isEqualTo(c.token());
        assertThat(client.heldLeases()).isEqualTo(3);
    }

    @Test
    void eachLeaseOfABatchIsRenewedAndLostOnItsOwn() {
        FencedLeaseBatch batch = client.tryAcquireAll(List.of("a", "c")).block(BOUND);
        clock.advanceTimeBy(Duration.ofSeconds(10));
        assertThat(batch.leases()).allMatch(FencedLease::isHeld);
        assertThat(client.forceLoss("a", LossReason.NOT_HELD)).isTrue();
        assertThat(batch.lease("a").isHeld()).isFalse();
        assertThat(batch.lease("c").isHeld()).isTrue();
        StepVerifier.create(batch.releaseAll())
                .expectNext(Map.of("a", ReleaseOutcome.NOT_HELD, "c", ReleaseOutcome.RELEASED))
                .verifyComplete();
        assertThat(heldInStore("c")).isFalse();
        assertThat(client.heldLeases()).isZero();
    }

    @Test
    void releaseAllKeepsTheOrderOfTheBatchAndIsIdempotent() {
        FencedLeaseBatch batch = client.tryAcquireAll(List.of("z", "y", "x")).block(BOUND);
        assertThat(batch.releaseAll().block(BOUND).keySet()).containsExactly("z", "y", "x");
        assertThat(batch.releaseAll().block(BOUND).values()).containsOnly(ReleaseOutcome.RELEASED);
        assertThat(heldInStore("z") || heldInStore("y") || heldInStore("x")).isFalse();
    }

    @Test
    void releaseAllIsOneStoreCallForEveryLeaseThatNeedsOne() {
        FencedLeaseBatch batch = client.tryAcquireAll(List.of("a", "b", "c", "d", "e")).block(BOUND);
        // b released on its own before, c lost: neither needs the batch's call (c's lock is freed as a lost lease's is).
        assertThat(batch.lease("b").release().block(BOUND)).isEqualTo(ReleaseOutcome.RELEASED);
        assertThat(client.forceLoss("c", LossReason.NOT_HELD)).isTrue();
        int singleReleases = store.releases.get();
        Map<String, ReleaseOutcome> outcomes = batch.releaseAll().block(BOUND);
        assertThat(outcomes).containsExactly(Map.entry("a", ReleaseOutcome.RELEASED), Map.entry("b", ReleaseOutcome.RELEASED),
                Map.entry("c", ReleaseOutcome.NOT_HELD), Map.entry("d", ReleaseOutcome.RELEASED),
                Map.entry("e", ReleaseOutcome.RELEASED));
        assertThat(store.releaseAlls).as("one store call, for a, d and e").containsExactly(3);
        assertThat(store.releases.get() - singleReleases).as("the default releaseAll's own releases").isEqualTo(3);
        assertThat(heldInStore("a") || heldInStore("d") || heldInStore("e")).isFalse();
        assertThat(client.heldLeases()).isZero();
    }

    @Test
    void aLeaseOfTheBatchWithAWaiterOfThisClientIsHandedOffAndTheOthersShareOneCall() {
        FencedLeaseBatch batch = client.tryAcquireAll(List.of("a", "b", "c")).block(BOUND);
        java.util.concurrent.CompletableFuture<FencedLease> waiter = client.acquire("b").toFuture();
        assertThat(waiter).isNotDone();
        Map<String, ReleaseOutcome> outcomes = batch.releaseAll().block(BOUND);
        assertThat(outcomes.values()).containsOnly(ReleaseOutcome.RELEASED);
        assertThat(store.handoffs).as("b handed to the waiter in a call of its own").hasValue(1);
        assertThat(store.releaseAlls).as("a and c in one call").containsExactly(2);
        assertThat(waiter).isCompleted();
        FencedLease next = waiter.join();
        assertThat(next.token()).isGreaterThan(batch.lease("b").token());
        assertThat(memory.lock("b").block(BOUND).token()).isEqualTo(next.token());
        assertThat(heldInStore("a") || heldInStore("c")).isFalse();
        next.release().block(BOUND);
    }

    @Test
    void aReleaseTheStoreFailsFailsReleaseAllOnceTheOthersEndedAndCanBeRetried() {
        LockServiceException down = LockServiceException.of("b", "release", "down", null);
        java.util.concurrent.atomic.AtomicBoolean failB = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<List<String>> asked = new java.util.concurrent.CopyOnWriteArrayList<>();
        CountingLeaseStore half = new CountingLeaseStore(memory) {
            @Override
            public Mono<List<ReleaseResult>> releaseAll(List<ReleaseRequest> requests) {
                asked.add(requests.stream().map(ReleaseRequest::name).toList());
                if (!failB.get()) {
                    return super.releaseAll(requests);
                }
                // The call fails for b alone: b stays held in the store, the others are released.
                List<ReleaseRequest> others = requests.stream().filter(r -> !r.name().equals("b")).toList();
                return super.releaseAll(others).map(results -> {
                    List<ReleaseResult> all = new ArrayList<>(results);
                    for (int i = 0; i < requests.size(); i++) {
                        if (requests.get(i).name().equals("b")) {
                            all.add(i, ReleaseResult.failed(down));
                        }
                    }
                    return all;
                });
            }
        };
        LeasingLockClient halfClient = client(half);
        FencedLeaseBatch batch = halfClient.tryAcquireAll(List.of("a", "b", "c")).block(BOUND);
        StepVerifier.create(batch.releaseAll()).verifyErrorSatisfies(e -> assertThat(e).isSameAs(down));
        assertThat(asked).as("one call for the three").containsExactly(List.of("a", "b", "c"));
        assertThat(heldInStore("a") || heldInStore("c")).as("the others released").isFalse();
        assertThat(heldInStore("b")).isTrue();
        assertThat(batch.lease("a").release().block(BOUND)).isEqualTo(ReleaseOutcome.RELEASED);
        failB.set(false);
        assertThat(batch.lease("b").release().block(BOUND)).as("retried alone").isEqualTo(ReleaseOutcome.RELEASED);
        assertThat(heldInStore("b")).isFalse();
        assertThat(halfClient.heldLeases()).isZero();
    }

    @Test
    void aWholeReleaseCallThatFailsFailsReleaseAllWithTheFirstLeasesErrorNotAComposite() {
        CountingLeaseStore reset = new CountingLeaseStore(memory) {
            @Override
            public Mono<List<ReleaseResult>> releaseAll(List<ReleaseRequest> requests) {
                // The call was reset: every release fails, each with its own lock's name.
                return Mono.just(requests.stream().map(r -> ReleaseResult.failed(
                        LockServiceException.of(r.name(), "release", "connection reset", null))).toList());
            }
        };
        LeasingLockClient resetClient = client(reset);
        FencedLeaseBatch batch = resetClient.tryAcquireAll(List.of("a", "b", "c")).block(BOUND);
        StepVerifier.create(batch.releaseAll()).verifyErrorSatisfies(e -> {
            assertThat(e).isExactlyInstanceOf(LockServiceException.class).hasMessageContaining("'a'");
            assertThat(e.getSuppressed()).hasSize(2).allSatisfy(s -> assertThat(s).isInstanceOf(LockServiceException.class));
        });
    }

    @Test
    void cancellingBeforeTheReplyLeavesNoLockBehind() {
        CountingLeaseStore slow = new CountingLeaseStore(memory) {
            @Override
            public Mono<List<AcquireResult>> acquireAll(List<AcquireRequest> requests) {
                return super.acquireAll(requests).delayElement(Duration.ofSeconds(1), clock);
            }
        };
        LeasingLockClient slowClient = client(slow);
        Disposable batch = slowClient.tryAcquireAll(List.of("a", "b")).subscribe();
        batch.dispose();
        clock.advanceTimeBy(Duration.ofSeconds(2));
        assertThat(slow.acquireAlls).hasValue(1);
        assertThat(heldInStore("a")).as("undone after the reply").isFalse();
        assertThat(heldInStore("b")).isFalse();
        assertThat(slowClient.heldLeases()).isZero();
    }

    @Test
    void aFailedNameFailsTheBatchAndReleasesWhatWasGranted() {
        LockServiceException down = LockServiceException.of("b", "acquire", "down", null);
        CountingLeaseStore half = new CountingLeaseStore(memory) {
            @Override
            public Mono<List<AcquireResult>> acquireAll(List<AcquireRequest> requests) {
                return super.acquireAll(requests).map(results -> {
                    List<AcquireResult> changed = new ArrayList<>(results);
                    changed.set(1, AcquireResult.failed(down));
                    return changed;
                });
            }
        };
        LeasingLockClient halfClient = client(half);
        StepVerifier.create(halfClient.tryAcquireAll(List.of("a", "b", "c")))
                .verifyErrorSatisfies(e -> assertThat(e).isSameAs(down));
        clock.advanceTimeBy(Duration.ofMillis(10));
        assertThat(halfClient.heldLeases()).isZero();
        assertThat(heldInStore("a")).isFalse();
        assertThat(heldInStore("c")).isFalse();
    }

    @Test
    void argumentsAreCheckedBeforeAnyIo() {
        StepVerifier.create(client.tryAcquireAll(List.of("a", "b", "a")))
                .verifyErrorSatisfies(e -> assertThat(e).isExactlyInstanceOf(IllegalArgumentException.class)
                        .hasMessage("Lock 'a' appears twice in one batch: a batch takes each lock once"));
        List<String> tooMany = IntStream.range(0, LeaseBatches.MAX_NAMES + 1).mapToObj(i -> "n" + i).toList();
        StepVerifier.create(client.tryAcquireAll(tooMany))
                .verifyErrorSatisfies(e -> assertThat(e).isExactlyInstanceOf(IllegalArgumentException.class)
                        .hasMessage("A batch takes at most 256 locks, was given 257: split it into batches of at most 256"));
        StepVerifier.create(client.tryAcquireAll(List.of("a"), null))
                .verifyErrorSatisfies(e -> assertThat(e).isExactlyInstanceOf(NullPointerException.class)
                        .hasMessage("options must not be null"));
        StepVerifier.create(client.tryAcquireAll(List.of("a{b}")))
                .verifyError(IllegalArgumentException.class);
        assertThat(store.acquireAlls).hasValue(0);
        assertThat(store.acquires).hasValue(0);
    }

    @Test
    void anEmptyBatchIsEmptyWithoutIo() {
        StepVerifier.create(client.tryAcquireAll(List.of()))
                .assertNext(batch -> {
                    assertThat(batch.leases()).isEmpty();
                    assertThat(batch.busy()).isEmpty();
                })
                .verifyComplete();
        assertThat(store.acquireAlls).hasValue(0);
    }

    @Test
    void aNameTheEnclosingScopeHoldsIsRefusedNotReused() {
        StepVerifier.create(client.withLease("a", lease -> client.tryAcquireAll(List.of("b", "a"))))
                .verifyErrorSatisfies(e -> assertThat(e).isExactlyInstanceOf(IllegalStateException.class)
                        .hasMessage("Lock 'a' is already held by an enclosing scope: a batch does not reuse its lease; "
                                + "leave the name out of the batch"));
        assertThat(heldInStore("b")).isFalse();
    }

    @Test
    void aClosedClientRefusesABatch() {
        client.closeLater().subscribe();
        clock.advanceTimeBy(Duration.ofSeconds(30));
        StepVerifier.create(client.tryAcquireAll(List.of("a")))
                .verifyError(LockClientClosedException.class);
    }

    @Test
    void leaseTimeAndMaxHoldOfTheOptionsApplyToEveryLease() {
        FencedLeaseBatch batch = client.tryAcquireAll(List.of("a", "b"),
                AcquireOptions.defaults().withLeaseTime(Duration.ofSeconds(5))).block(BOUND);
        assertThat(batch.leases()).extracting(FencedLease::leaseTime).containsOnly(Duration.ofSeconds(5));
        assertThat(store.acquireMillis).containsExactly(5_000L, 5_000L);
    }

    /** The interface's default, as another implementation (the test kit's, say) gets it: single attempts. */
    @Test
    void theDefaultImplementationMakesSingleAttemptsWithTheSameOutcome() {
        FencedLockClient plain = (FencedLockClient) Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {FencedLockClient.class}, new InvocationHandler() {
                    @Override
                    public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
                        if (method.getName().equals("tryAcquireAll")) {
                            return InvocationHandler.invokeDefault(proxy, method, args);
                        }
                        return method.invoke(client, args);
                    }
                });
        client.tryAcquire("b").block(BOUND);
        FencedLeaseBatch batch = plain.tryAcquireAll(List.of("a", "b", "c")).block(BOUND);
        assertThat(store.acquireAlls).as("no batch call: single attempts").hasValue(0);
        assertThat(store.acquires).hasValue(4);
        assertThat(batch.busy()).containsExactly("b");
        assertThat(batch.leases()).extracting(FencedLease::name).containsExactly("a", "c");
        StepVerifier.create(plain.tryAcquireAll(List.of("a", "a")))
                .verifyError(IllegalArgumentException.class);
        assertThat(batch.releaseAll().block(BOUND).values()).containsOnly(ReleaseOutcome.RELEASED);
    }
}
