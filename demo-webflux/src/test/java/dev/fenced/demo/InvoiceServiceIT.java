package dev.fenced.demo;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.ReleaseOutcome;
import dev.fenced.lock.StaleFencingTokenException;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

/** The read-modify-write of {@link InvoiceService} claims the row before it reads it. */
final class InvoiceServiceIT extends DemoTestSupport {

    @Autowired
    InvoiceService service;

    @Autowired
    InvoiceRepository invoices;

    @Autowired
    FencedLockClient locks;

    @Test
    void aStalledHolderThatReadBeforeTheNewHoldersClaimCannotWriteWhileTheNewHolderComputes() {
        freshInvoices(100_101, 100_101);
        // A held the lock, claimed and read the invoice, and stalled past its lease.
        FencedLease a = locks.acquire(InvoiceService.lockName(100_101)).block(Duration.ofSeconds(10));
        assertThat(a).isNotNull();
        Invoice seenByA = invoices.claim(100_101, a).block(Duration.ofSeconds(10));
        assertThat(seenByA).isNotNull();
        FencedLease whatAStillBelieves = new StillHeld(a);
        a.release().block(Duration.ofSeconds(10));

        // B processes the invoice with a slow computation between its read and its write.
        CompletableFuture<ProcessResult> b = service.process(100_101, AcquireOptions.defaults(), Duration.ofSeconds(3)).toFuture();
        await().atMost(Duration.ofSeconds(30)).until(() -> !a.ownerId().equals(stored(100_101).fencingOwner()));
        // B's token is in the row before B has written anything: its claim, not its write.
        assertThat(stored(100_101).timesProcessed()).isZero();

        // A wakes while B computes: B's claim already holds the row, so A's write is refused, not B's.
        StepVerifier.create(invoices.process(seenByA, whatAStillBelieves, "stalled"))
                .verifyError(StaleFencingTokenException.class);
        ProcessResult result = b.join();
        assertThat(result.invoice().timesProcessed()).isEqualTo(1);
        assertThat(result.invoice().processedBy()).isEqualTo("process");
        assertThat(stored(100_101).ledgerTotal()).isEqualTo(100);
    }

    @Test
    void processingAMissingInvoiceIsNotFound() {
        StepVerifier.create(service.process(999_999_001L, AcquireOptions.defaults(), Duration.ZERO))
                .verifyError(InvoiceNotFoundException.class);
    }

    /** The lease as a stalled holder still sees it: held, with its token and owner; told of nothing. */
    private record StillHeld(FencedLease lease) implements FencedLease {

        @Override
        public String name() {
            return lease.name();
        }

        @Override
        public long token() {
            return lease.token();
        }

        @Override
        public String lockId() {
            return lease.lockId();
        }

        @Override
        public String ownerId() {
            return lease.ownerId();
        }

        @Override
        public Duration leaseTime() {
            return lease.leaseTime();
        }

        @Override
        public Duration remainingValidity() {
            return lease.leaseTime();
        }

        @Override
        public boolean isHeld() {
            return true;
        }

        @Override
        public Mono<LeaseLostException> lost() {
            return Mono.never();
        }

        @Override
        public Mono<ReleaseOutcome> release() {
            return lease.release();
        }

        @Override
        public void reportRejectedWrite(StaleFencingTokenException rejection) {
        }
    }
}
