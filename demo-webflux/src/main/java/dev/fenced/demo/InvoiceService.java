package dev.fenced.demo;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.r2dbc.FencedRowNotFoundException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.stereotype.Service;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** Acquire-then-write: every change to an invoice is made under its lock and carries the lease's token. */
@Service
class InvoiceService {

    private final FencedLockClient locks;
    private final InvoiceRepository invoices;
    private final int settleConcurrency;
    private final Duration settleItemTimeout;

    InvoiceService(FencedLockClient locks, InvoiceRepository invoices,
            @Value("${fenced.demo.settle-concurrency:16}") int settleConcurrency,
            @Value("${fenced.demo.settle-item-timeout:30s}") Duration settleItemTimeout) {
        this.locks = locks;
        this.invoices = invoices;
        this.settleConcurrency = settleConcurrency;
        this.settleItemTimeout = settleItemTimeout;
    }

    static String lockName(long id) {
        return "invoice:" + id;
    }

    Mono<Invoice> find(long id) {
        return invoices.find(id).switchIfEmpty(Mono.error(() -> new InvoiceNotFoundException(id)));
    }

    /**
     * Lock, claim and read, compute, write with the token, release. {@code work} simulates a slow computation
     * between the read and the write (the window in which a lease can be lost). The claim puts the lease's token in
     * the row before the read, so a stalled holder that read earlier can no longer write, and this read-modify-write
     * cannot lose its update to it.
     */
    Mono<ProcessResult> process(long id, AcquireOptions options, Duration work) {
        String name = lockName(id);
        boolean tryOnce = Duration.ZERO.equals(options.maxWait());
        Flux<ProcessResult> result = locks.withLease(name, options, lease -> claim(id, lease)
                .delayElement(work)
                .flatMap(invoice -> invoices.process(invoice, lease, "process"))
                .then(find(id))
                .map(invoice -> new ProcessResult(invoice, lease.token(), name)));
        return result.singleOrEmpty()
                .switchIfEmpty(Mono.defer(() -> tryOnce
                        ? Mono.error(new LockBusyException(name))
                        : Mono.error(new IllegalStateException("The work under " + name + " emitted nothing"))));
    }

    /**
     * Settles each invoice under its own lease, at most {@code settleConcurrency} at a time; the output is
     * back-pressured, so a slow reader slows the settling down. An invoice already settled is left alone,
     * which keeps a retried request from settling anything twice.
     */
    Flux<SettleProgress> settle(List<Long> ids) {
        return Flux.defer(() -> {
            AtomicInteger inFlight = new AtomicInteger();
            AtomicInteger maxInFlight = new AtomicInteger();
            AtomicInteger done = new AtomicInteger();
            int total = ids.size();
            return Flux.fromIterable(ids).flatMap(id -> Mono.defer(() -> {
                int now = inFlight.incrementAndGet();
                maxInFlight.accumulateAndGet(now, Math::max);
                // One stuck invoice must not stall the batch: it times out (its lease is released on cancel).
                return settleOne(id)
                        .timeout(settleItemTimeout)
                        .onErrorResume(e -> Mono.just(new Outcome("FAILED", null, e.toString())))
                        .map(o -> {
                            // Counted out before the inner completes, which is when flatMap starts the next one.
                            inFlight.decrementAndGet();
                            return new Settled(id, o, now);
                        });
            }), settleConcurrency)
                    // After flatMap the signals are serialized, so "done" counts in the order of the stream.
                    .map(s -> new SettleProgress(s.id(), s.outcome().outcome(), s.outcome().token(),
                            done.incrementAndGet(), total, s.inFlight(), maxInFlight.get(), s.outcome().error()));
        });
    }

    /** The claim step of a read-modify-write: a missing invoice is a 404, as for a plain read. */
    private Mono<Invoice> claim(long id, FencedLease lease) {
        return invoices.claim(id, lease)
                .onErrorMap(FencedRowNotFoundException.class, e -> new InvoiceNotFoundException(id));
    }

    private Mono<Outcome> settleOne(long id) {
        return locks.withLease(lockName(id), lease -> claim(id, lease).flatMap(invoice -> "SETTLED".equals(invoice.status())
                        ? Mono.just(new Outcome("ALREADY_SETTLED", lease.token(), null))
                        : invoices.settle(invoice, lease).thenReturn(new Outcome("SETTLED", lease.token(), null))))
                .single();
    }

    private record Settled(long id, Outcome outcome, int inFlight) {
    }

    private record Outcome(String outcome, @org.jspecify.annotations.Nullable Long token,
            @org.jspecify.annotations.Nullable String error) {
    }
}
