package dev.fenced.lock.internal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.internal.LeaseStore.AcquireReply;
import dev.fenced.lock.internal.LeaseStore.RenewRequest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.test.StepVerifier;

/**
 * The behaviour every {@link LeaseStore} must have. Runs against the in-memory store (virtual time) and
 * the Redis store (real time), so the two cannot drift apart.
 */
public abstract class LeaseStoreContract {

    protected abstract LeaseStore store();

    /** Lets {@code duration} pass on the store's clock. */
    protected abstract void elapse(Duration duration);

    /**
     * Lets {@code duration} pass in real time: {@link #elapse} of a store on a real server.
     *
     * @param duration how long
     */
    protected static void sleep(Duration duration) {
        try {
            Thread.sleep(duration.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** Whether the store mints consecutive tokens ({@code counter + 1}) rather than server-time ones. */
    protected abstract boolean consecutiveTokens();

    private final String name = "contract-" + UUID.randomUUID();

    private AcquireReply acquire(String lock, String owner, long leaseMillis, long floor) {
        AcquireReply reply = store().acquire(lock, owner, leaseMillis, floor).block(Duration.ofSeconds(5));
        assertThat(reply).isNotNull();
        return reply;
    }

    private boolean release(String lock, String owner, Long token) {
        return Boolean.TRUE.equals(store().release(lock, owner, token).block(Duration.ofSeconds(5)));
    }

    @Test
    void tokensStrictlyIncreaseAcrossGrants() {
        long previous = 0;
        for (int i = 0; i < 5; i++) {
            String owner = "owner" + i;
            AcquireReply reply = acquire(name, owner, 10_000, 0);
            assertThat(reply.acquired()).isTrue();
            assertThat(reply.token()).isGreaterThan(previous);
            previous = reply.token();
            assertThat(release(name, owner, reply.token())).isTrue();
        }
    }

    @Test
    void aHandOffPassesTheLockFromItsHolderToTheNextOwnerWithAHigherToken() {
        AcquireReply a = acquire(name, "a", 10_000, 0);
        LeaseStore.Handoff handoff = store().handOff(name, "a", a.token(), "b", 10_000, 0).block(Duration.ofSeconds(5));
        assertThat(handoff).isNotNull();
        assertThat(handoff.released()).isTrue();
        assertThat(handoff.next()).isNotNull();
        assertThat(handoff.next().acquired()).isTrue();
        assertThat(handoff.next().token()).isGreaterThan(a.token());
        assertThat(acquire(name, "c", 10_000, 0).acquired()).as("the lock is b's now").isFalse();
        assertThat(release(name, "a", a.token())).isFalse();
        assertThat(release(name, "b", handoff.next().token())).isTrue();
    }

    @Test
    void aHandOffFromALeaseThatDoesNotHoldTheLockReleasesNothingAndIsAPlainAcquire() {
        AcquireReply a = acquire(name, "a", 10_000, 0);
        LeaseStore.Handoff handoff = store().handOff(name, "x", a.token(), "b", 10_000, 0).block(Duration.ofSeconds(5));
        assertThat(handoff).isNotNull();
        assertThat(handoff.released()).isFalse();
        assertThat(handoff.next()).isNotNull();
        assertThat(handoff.next().acquired()).as("a holds the lock still").isFalse();
        assertThat(release(name, "a", a.token())).isTrue();
        LeaseStore.Handoff onFree = store().handOff(name, "a", a.token(), "b", 10_000, 0).block(Duration.ofSeconds(5));
        assertThat(onFree).isNotNull();
        assertThat(onFree.released()).isFalse();
        assertThat(onFree.next()).isNotNull();
        assertThat(onFree.next().acquired()).as("a free lock is taken").isTrue();
    }

    @Test
    void heldLockReportsTheHoldersRemainingTime() {
        acquire(name, "a", 10_000, 0);
        AcquireReply reply = acquire(name, "b", 10_000, 0);
        assertThat(reply.acquired()).isFalse();
        assertThat(reply.holderTtlMillis()).isBetween(1L, 10_000L);
    }

    @Test
    void retriedAcquireBySameOwnerKeepsItsToken() {
        AcquireReply first = acquire(name, "a", 10_000, 0);
        AcquireReply retry = acquire(name, "a", 10_000, 0);
        assertThat(retry.acquired()).isTrue();
        assertThat(retry.token()).isEqualTo(first.token());
    }

    @Test
    void expiredLeaseCanBeTakenWithAHigherToken() {
        AcquireReply first = acquire(name, "a", 100, 0);
        elapse(Duration.ofMillis(250));
        AcquireReply second = acquire(name, "b", 10_000, 0);
        assertThat(second.acquired()).isTrue();
        assertThat(second.token()).isGreaterThan(first.token());
    }

    @Test
    void renewalExtendsAHeldLease() {
        AcquireReply a = acquire(name, "a", 400, 0);
        elapse(Duration.ofMillis(250));
        List<Boolean> renewed = store().renew(List.of(new RenewRequest(name, "a", a.token(), 400))).block(Duration.ofSeconds(5));
        assertThat(renewed).containsExactly(true);
        elapse(Duration.ofMillis(250));
        assertThat(acquire(name, "b", 400, 0).acquired()).as("still held 500 ms after a 400 ms grant").isFalse();
    }

    @Test
    void renewalChecksOwnerAndToken() {
        AcquireReply a = acquire(name, "a", 10_000, 0);
        List<Boolean> renewed = store().renew(List.of(
                new RenewRequest(name, "a", a.token(), 10_000),
                new RenewRequest(name, "a", a.token() + 1, 10_000),
                new RenewRequest(name, "b", a.token(), 10_000),
                new RenewRequest(name + "-free", "a", a.token(), 10_000))).block(Duration.ofSeconds(5));
        assertThat(renewed).containsExactly(true, false, false, false);
    }

    @Test
    void renewalOfManyLeasesAnswersInOrder() {
        List<RenewRequest> requests = new ArrayList<>();
        List<Boolean> expected = new ArrayList<>();
        for (int i = 0; i < 600; i++) {
            String lock = name + "-" + i;
            AcquireReply reply = acquire(lock, "a", 10_000, 0);
            boolean right = i % 3 != 0;
            requests.add(new RenewRequest(lock, "a", right ? reply.token() : reply.token() + 7, 10_000));
            expected.add(right);
        }
        assertThat(store().renew(requests).block(Duration.ofSeconds(10))).isEqualTo(expected);
    }

    @Test
    void releaseChecksOwnerAndToken() {
        AcquireReply a = acquire(name, "a", 10_000, 0);
        assertThat(release(name, "b", a.token())).isFalse();
        assertThat(release(name, "a", a.token() + 1)).isFalse();
        assertThat(acquire(name, "b", 10_000, 0).acquired()).isFalse();
        assertThat(release(name, "a", a.token())).isTrue();
        assertThat(release(name, "a", a.token())).as("second release").isFalse();
        assertThat(acquire(name, "b", 10_000, 0).acquired()).isTrue();
    }

    @Test
    void releaseWithoutTokenMatchesAnyTokenOfTheOwnerOnly() {
        acquire(name, "owner-1", 10_000, 0);
        assertThat(release(name, "owner", null)).as("a prefix of the owner id is not the owner").isFalse();
        assertThat(release(name, "owner-1", null)).isTrue();
    }

    @Test
    void floorMovesTheNextTokenPastIt() {
        AcquireReply first = acquire(name, "a", 10_000, 1_000);
        assertThat(first.token()).isGreaterThan(1_000);
        release(name, "a", first.token());
        AcquireReply second = acquire(name, "b", 10_000, 5);
        assertThat(second.token()).as("a floor below the counter changes nothing").isGreaterThan(first.token());
        if (consecutiveTokens()) {
            assertThat(List.of(first.token(), second.token())).containsExactly(1_001L, 1_002L);
        }
        AcquireReply third = acquire(name + "-high", "c", 10_000, 1L << 52);
        assertThat(third.token()).as("a floor above server time").isEqualTo((1L << 52) + 1);
    }

    @Test
    void releaseNotifiesWatchers() {
        AcquireReply a = acquire(name, "a", 10_000, 0);
        long[] first = new long[1];
        StepVerifier.create(store().releases(name))
                .consumeNextWith(count -> first[0] = count)
                .then(() -> release(name, "a", a.token()))
                .expectNextMatches(count -> count > first[0])
                .thenCancel()
                .verify(Duration.ofSeconds(10));
    }

    /**
     * Many acquires and releases at once (a store may send them together): each one answers for its own lock, as
     * it would alone.
     */
    @Test
    void concurrentAcquiresAndReleasesEachAnswerForTheirOwnLock() {
        int locks = 150;
        List<AcquireReply> replies = Flux.range(0, locks)
                .flatMapSequential(i -> store().acquire(name + "-" + i, "owner-" + i, 10_000, i % 5 == 0 ? 1_000 + i : 0), locks)
                .collectList()
                .block(Duration.ofSeconds(30));
        assertThat(replies).hasSize(locks).allMatch(AcquireReply::acquired);
        for (int i = 0; i < locks; i += 5) {
            assertThat(replies.get(i).token()).as("the floor of lock %d", i).isGreaterThan(1_000L + i);
        }
        // Half of the owners ask again (idempotent, same token); the others' locks are busy for a stranger.
        List<AcquireReply> again = Flux.range(0, locks)
                .flatMapSequential(i -> store().acquire(name + "-" + i, i % 2 == 0 ? "owner-" + i : "stranger", 10_000, 0), locks)
                .collectList()
                .block(Duration.ofSeconds(30));
        for (int i = 0; i < locks; i++) {
            if (i % 2 == 0) {
                assertThat(again.get(i).acquired()).isTrue();
                assertThat(again.get(i).token()).isEqualTo(replies.get(i).token());
            } else {
                assertThat(again.get(i).acquired()).isFalse();
                assertThat(again.get(i).holderTtlMillis()).isPositive();
            }
        }
        // Every third release names a wrong token: it deletes nothing.
        List<Boolean> released = Flux.range(0, locks)
                .flatMapSequential(i -> store().release(name + "-" + i, "owner-" + i,
                        i % 3 == 0 ? replies.get(i).token() + 1 : replies.get(i).token()), locks)
                .collectList()
                .block(Duration.ofSeconds(30));
        for (int i = 0; i < locks; i++) {
            assertThat(released.get(i)).as("release of lock %d", i).isEqualTo(i % 3 != 0);
        }
    }

    /** Many owners asking for one lock at once: exactly one gets it. */
    @Test
    void concurrentAcquiresOfOneLockGrantItToOneOwner() {
        int owners = 100;
        List<AcquireReply> replies = Flux.range(0, owners)
                .flatMap(i -> store().acquire(name, "owner-" + i, 10_000, 0), owners)
                .collectList()
                .block(Duration.ofSeconds(30));
        assertThat(replies).hasSize(owners);
        assertThat(replies.stream().filter(AcquireReply::acquired).count()).isEqualTo(1);
    }

    @Test
    void namesOfAnyScriptAreTheirOwnLocksInSingleAndBatchCallsAndListedAsGiven() {
        List<String> names = List.of(name + "-ключ", name + "-日本語", name + "-🔒", name + "-é" + "é".repeat(100));
        List<LeaseStore.AcquireResult> granted = store().acquireAll(names.stream()
                .map(n -> new LeaseStore.AcquireRequest(n, "a", 10_000, 0)).toList()).block(Duration.ofSeconds(5));
        assertThat(granted).hasSize(names.size()).allSatisfy(r -> assertThat(r.reply().acquired()).isTrue());
        assertThat(acquire(names.get(1), "b", 10_000, 0).acquired()).as("held under its own name").isFalse();
        assertThat(list(name + "-*")).extracting(LeaseStore.LockState::name).containsExactlyInAnyOrderElementsOf(names);
        List<LeaseStore.ReleaseResult> released = store().releaseAll(names.stream()
                .map(n -> new LeaseStore.ReleaseRequest(n, "a", null)).toList()).block(Duration.ofSeconds(5));
        assertThat(released).hasSize(names.size()).allSatisfy(r -> assertThat(r.released()).isTrue());
        assertThat(list(name + "-*")).isEmpty();
        AcquireReply single = acquire(names.get(2), "c", 10_000, 0);
        assertThat(single.acquired()).isTrue();
        assertThat(single.token()).isGreaterThan(granted.get(2).reply().token());
        assertThat(release(names.get(2), "c", single.token())).isTrue();
    }

    private List<LeaseStore.LockState> list(String pattern) {
        List<LeaseStore.LockState> locks = store().locks(NamePattern.of(pattern)).collectList().block(Duration.ofSeconds(30));
        assertThat(locks).isNotNull();
        return locks;
    }

    @Test
    void breakingAHeldLockFreesItAndTheNextGrantsTokenIsAboveTheBrokenOne() {
        AcquireReply a = acquire(name, "a", 10_000, 0);
        LeaseStore.Broken broken = store().breakLock(name).block(Duration.ofSeconds(5));
        assertThat(broken).isEqualTo(new LeaseStore.Broken(true, a.token(), null));
        assertThat(store().renew(List.of(new RenewRequest(name, "a", a.token(), 10_000))).block(Duration.ofSeconds(5)))
                .as("the broken holder's renewal").containsExactly(false);
        assertThat(release(name, "a", a.token())).as("the broken holder's release").isFalse();
        AcquireReply next = acquire(name, "b", 10_000, 0);
        assertThat(next.acquired()).isTrue();
        assertThat(next.token()).isGreaterThan(a.token());
        if (consecutiveTokens()) {
            assertThat(next.token()).isEqualTo(a.token() + 1);
        }
    }

    @Test
    void breakingAnExpectedTokenLeavesALockHeldWithAnotherTokenAlone() {
        AcquireReply a = acquire(name, "a", 10_000, 0);
        StepVerifier.create(store().breakLock(name, a.token() + 1)).expectNext(LeaseStore.Broken.NOTHING).verifyComplete();
        StepVerifier.create(store().breakLock(name, a.token())).expectNext(new LeaseStore.Broken(true, a.token(), null))
                .verifyComplete();
        AcquireReply b = acquire(name, "b", 10_000, 0);
        assertThat(b.acquired()).isTrue();
        StepVerifier.create(store().breakLock(name, a.token())).as("a retry of the first break")
                .expectNext(LeaseStore.Broken.NOTHING).verifyComplete();
        assertThat(store().renew(List.of(new RenewRequest(name, "b", b.token(), 10_000))).block(Duration.ofSeconds(5)))
                .as("the next holder's renewal").containsExactly(true);
    }

    @Test
    void breakingIsIdempotentAndAFreeLockIsNotHeld() {
        AcquireReply a = acquire(name, "a", 10_000, 0);
        StepVerifier.create(store().breakLock(name)).expectNextMatches(LeaseStore.Broken::held).verifyComplete();
        StepVerifier.create(store().breakLock(name)).expectNext(LeaseStore.Broken.NOTHING).verifyComplete();
        StepVerifier.create(store().breakLock(name + "-never-taken")).expectNext(LeaseStore.Broken.NOTHING).verifyComplete();
        assertThat(acquire(name, "b", 10_000, 0).token()).isGreaterThan(a.token());
    }

    @Test
    void breakingWakesWaitersOfTheLock() {
        acquire(name, "a", 10_000, 0);
        long[] first = new long[1];
        StepVerifier.create(store().releases(name))
                .consumeNextWith(count -> first[0] = count)
                .then(() -> store().breakLock(name).block(Duration.ofSeconds(5)))
                .expectNextMatches(count -> count > first[0])
                .thenCancel()
                .verify(Duration.ofSeconds(10));
    }

    @Test
    void theFleetViewListsTheHeldLocksWhoseNamesMatchWithTokenAndRemainingTime() {
        AcquireReply x1 = acquire(name + "-x-1", "a", 10_000, 0);
        AcquireReply x2 = acquire(name + "-x-2", "b", 20_000, 0);
        AcquireReply x3 = acquire(name + "-x-3", "c", 10_000, 0);
        acquire(name + "-y-1", "d", 10_000, 0);
        release(name + "-x-3", "c", x3.token());
        acquire(name + "-x-4", "e", 100, 0);
        elapse(Duration.ofMillis(250)); // x-4 has expired

        List<LeaseStore.LockState> locks = list(name + "-x-*");
        assertThat(locks).extracting(LeaseStore.LockState::name).containsExactlyInAnyOrder(name + "-x-1", name + "-x-2");
        for (LeaseStore.LockState lock : locks) {
            AcquireReply granted = lock.name().endsWith("-1") ? x1 : x2;
            assertThat(lock.token()).isEqualTo(granted.token());
            assertThat(lock.remainingMillis()).isBetween(1L, lock.name().endsWith("-1") ? 10_000L : 20_000L);
            assertThat(lock.holderLabel()).isNull();
        }
        assertThat(list(name + "-*")).hasSize(3);
        assertThat(list(name + "-x-1")).extracting(LeaseStore.LockState::name).containsExactly(name + "-x-1");
        assertThat(list(name + "-z*")).isEmpty();
    }

    @Test
    void patternCharactersOtherThanTheStarStandForThemselves() {
        String[] names = {"a_b", "axb", "a%b", "a?b", "a[b", "a]b", "a\\b", "a*b"};
        for (String n : names) {
            acquire(name + "-" + n, "a", 10_000, 0);
        }
        assertThat(list(name + "-a_b")).extracting(LeaseStore.LockState::name).containsExactly(name + "-a_b");
        assertThat(list(name + "-a%b")).extracting(LeaseStore.LockState::name).containsExactly(name + "-a%b");
        assertThat(list(name + "-a?b")).extracting(LeaseStore.LockState::name).containsExactly(name + "-a?b");
        assertThat(list(name + "-a[b")).extracting(LeaseStore.LockState::name).containsExactly(name + "-a[b");
        assertThat(list(name + "-a\\b")).extracting(LeaseStore.LockState::name).containsExactly(name + "-a\\b");
        assertThat(list(name + "-a[x]b")).isEmpty();
        assertThat(list(name + "-a%")).isEmpty();
        assertThat(list(name + "-a_")).isEmpty();
        assertThat(list(name + "-a\\*")).extracting(LeaseStore.LockState::name).containsExactly(name + "-a\\b");
        assertThat(list(name + "-a*b")).hasSize(names.length);
    }

    @Test
    void oneLockIsReadByItsName() {
        AcquireReply a = acquire(name, "a", 10_000, 0);
        StepVerifier.create(store().lock(name))
                .assertNext(lock -> {
                    assertThat(lock.name()).isEqualTo(name);
                    assertThat(lock.token()).isEqualTo(a.token());
                    assertThat(lock.remainingMillis()).isBetween(1L, 10_000L);
                })
                .verifyComplete();
        release(name, "a", a.token());
        StepVerifier.create(store().lock(name)).verifyComplete();
        StepVerifier.create(store().lock(name + "-never-taken")).verifyComplete();
    }

    /** More locks than three pages: each is listed once, whatever the page boundaries. */
    @Test
    void theFleetViewPagesThroughManyLocksListingEachOnce() {
        int count = FleetPages.PAGE_SIZE * 3 + 7;
        Flux.range(0, count)
                .flatMap(i -> store().acquire(name + "-many-" + i, "owner", 30_000, 0), 64)
                .then()
                .block(Duration.ofSeconds(60));
        List<LeaseStore.LockState> locks = list(name + "-many-*");
        assertThat(locks).hasSize(count);
        assertThat(locks).extracting(LeaseStore.LockState::name).doesNotHaveDuplicates();
    }
}
