package dev.fenced.lock.test;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.LossReason;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

class InvoiceServiceTest {

    private final VirtualTimeScheduler clock = VirtualTimeScheduler.getOrSet();
    private final FencedLockTestKit locks = FencedLockTestKit.create(clock);
    private final InvoiceService service = new InvoiceService(locks.client());

    @AfterEach
    void resetClock() {
        VirtualTimeScheduler.reset();
    }

    @Test
    void losingTheLeaseMidWorkCancelsTheWork() {
        StepVerifier.withVirtualTime(() -> service.settle(42), () -> clock, Long.MAX_VALUE)
                .thenAwait(Duration.ofSeconds(3))
                .expectNext("step 0 with token 1", "step 1 with token 1", "step 2 with token 1")
                .then(() -> locks.loseLease("invoice:42", LossReason.NOT_HELD))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(LeaseLostException.class)
                        .hasMessage("Lease on lock 'invoice:42' with fencing token 1 was lost: "
                                + "the lock service no longer holds it (expired there, deleted, or taken over)"));
        assertThat(locks.holder("invoice:42")).isEmpty();
    }

    @Test
    void aFrozenHolderLosesItsLeaseAtTheDeadline() {
        StepVerifier.withVirtualTime(() -> service.settle(42), () -> clock, Long.MAX_VALUE)
                .thenAwait(Duration.ofSeconds(1))
                .expectNext("step 0 with token 1")
                .then(() -> locks.freeze("invoice:42")) // a GC pause: no more renewals
                .thenAwait(Duration.ofSeconds(30))
                .expectNextCount(28) // the work ran on until the lease's deadline (30 s - 1% - 2 ms)
                .verifyErrorSatisfies(e -> assertThat(((LeaseLostException) e).reason()).isEqualTo(LossReason.EXPIRED));
        assertThat(locks.holder("invoice:42")).isEmpty();
    }
}
