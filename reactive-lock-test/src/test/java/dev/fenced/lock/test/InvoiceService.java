package dev.fenced.lock.test;

import dev.fenced.lock.FencedLockClient;
import java.time.Duration;
import reactor.core.publisher.Flux;

/** The service of the README's testing example: slow work under a lease. */
class InvoiceService {

    private final FencedLockClient locks;

    InvoiceService(FencedLockClient locks) {
        this.locks = locks;
    }

    /** Settles an invoice in steps, one a second, each carrying the lease's fencing token. */
    Flux<String> settle(long invoiceId) {
        return locks.withLease("invoice:" + invoiceId, lease -> Flux.interval(Duration.ofSeconds(1))
                .take(100)
                .map(step -> "step " + step + " with token " + lease.token()));
    }
}
