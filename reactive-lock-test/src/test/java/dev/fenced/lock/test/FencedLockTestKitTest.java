package dev.fenced.lock.test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.LockAcquireTimeoutException;
import dev.fenced.lock.LockServiceException;
import dev.fenced.lock.LossReason;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/** The kit's controls, in virtual time. */
class FencedLockTestKitTest {

    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();
    private final FencedLockTestKit kit = FencedLockTestKit.builder(clock).leaseTime(Duration.ofSeconds(3)).build();

    @AfterEach
    void tearDown() {
        kit.close();
        clock.dispose();
    }

    @Test
    void tokensAreIssuedInOrderAndLeasesAreVisible() {
        FencedLease first = kit.client().acquire("a").block();
        first.release().block();
        FencedLease second = kit.client().acquire("a").block();
        assertThat(kit.issuedTokens("a")).containsExactly(1L, 2L);
        assertThat(kit.heldLeases()).extracting(FencedLease::token).containsExactly(second.token());
        assertThat(kit.holder("a")).contains(second.ownerId() + ":2");
    }

    @Test
    void leasesAreRenewedOnTheVirtualClock() {
        FencedLease lease = kit.client().acquire("a").block();
        clock.advanceTimeBy(Duration.ofMinutes(5));
        assertThat(lease.isHeld()).isTrue();
    }

    @Test
    void lostLeaseReportsTheGivenReasonAndFreesTheLock() {
        FencedLease lease = kit.client().acquire("a").block();
        kit.loseLease("a", LossReason.EXPIRED);
        StepVerifier.create(lease.lost()).assertNext(e -> assertThat(e.reason()).isEqualTo(LossReason.EXPIRED)).verifyComplete();
        assertThat(kit.client().tryAcquire("a").block()).isNotNull();
    }

    @Test
    void controlsNeedAHeldLease() {
        assertThatThrownBy(() -> kit.loseLease("nothing", LossReason.NOT_HELD))
                .isInstanceOf(IllegalStateException.class).hasMessage("No lease is held on 'nothing'");
        assertThatThrownBy(() -> kit.freeze("nothing")).hasMessage("No lease is held on 'nothing'");
    }

    @Test
    void frozenHolderLosesTheLeaseAtItsDeadlineAndAWaiterGetsTheLock() {
        FencedLease frozen = kit.client().acquire("a").block();
        kit.freeze("a");
        var waiting = kit.client().acquire("a").toFuture();
        clock.advanceTimeBy(Duration.ofMillis(2_967));
        assertThat(frozen.isHeld()).isTrue();
        clock.advanceTimeBy(Duration.ofMillis(200));
        assertThat(frozen.isHeld()).isFalse();
        assertThat(waiting).isCompleted();
        assertThat(waiting.join().token()).isEqualTo(2);
    }

    @Test
    void nextAcquireCanFail() {
        kit.failNextAcquire();
        StepVerifier.create(kit.client().acquire("a")).verifyError(LockServiceException.class);
        StepVerifier.create(kit.client().acquire("a").map(FencedLease::token)).expectNext(1L).verifyComplete();
    }

    @Test
    void hungAcquireFailsAfterTheCommandTimeout() {
        kit.hangNextAcquire();
        StepVerifier.create(kit.client().acquire("a"))
                .expectSubscription()
                .then(() -> clock.advanceTimeBy(Duration.ofSeconds(1)))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(LockServiceException.class)
                        .hasMessage("Lock service failed to acquire for lock 'a': no reply within the command timeout of 1000 ms"));
        assertThat(kit.holder("a")).isEmpty();
    }

    @Test
    void hungAcquireEndsAtAShorterMaximumWait() {
        kit.hangNextAcquire();
        StepVerifier.create(kit.client().acquire("a", AcquireOptions.defaults().withMaxWait(Duration.ofMillis(500))))
                .expectSubscription()
                .then(() -> clock.advanceTimeBy(Duration.ofMillis(500)))
                .verifyError(LockAcquireTimeoutException.class);
    }

    @Test
    void badSettingsAreRejectedLikeTheRealClient() {
        assertThatThrownBy(() -> FencedLockTestKit.builder(clock).leaseTime(Duration.ZERO))
                .hasMessage("leaseTime must be between 10 ms and 1 day, was PT0S");
    }
}
