package dev.fenced.demo;

import dev.fenced.lock.AcquireOptions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.server.ResponseStatusException;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** The invoice endpoints. Errors are answered as RFC 9457 problem details by {@link ProblemDetailsAdvice}. */
@RestController
class InvoiceController {

    static final int MAX_SETTLE = 10_000;
    private static final long MAX_WORK_MS = 30_000;

    private final InvoiceService service;

    InvoiceController(InvoiceService service) {
        this.service = service;
    }

    @GetMapping("/invoices/{id}")
    Mono<Invoice> get(@PathVariable("id") long id) {
        return service.find(requireId(id));
    }

    /**
     * Processes an invoice under its lock.
     *
     * @param maxWaitMs how long to wait for the lock; {@code 0} makes one attempt (409 when held); default: the
     *     client's
     * @param leaseMs the lease time; default: the client's
     * @param workMs a simulated computation between the read and the write, at most 30 s; default 0
     */
    @PostMapping("/invoices/{id}/process")
    Mono<ProcessResult> process(@PathVariable("id") long id,
            @RequestParam(name = "maxWaitMs", required = false) @Nullable Long maxWaitMs,
            @RequestParam(name = "leaseMs", required = false) @Nullable Long leaseMs,
            @RequestParam(name = "workMs", defaultValue = "0") long workMs) {
        requireId(id);
        AcquireOptions options = AcquireOptions.defaults();
        try {
            if (maxWaitMs != null) {
                options = options.withMaxWait(Duration.ofMillis(maxWaitMs));
            }
            if (leaseMs != null) {
                options = options.withLeaseTime(Duration.ofMillis(leaseMs));
            }
        } catch (IllegalArgumentException e) {
            throw new ResponseStatusException(HttpStatus.BAD_REQUEST, e.getMessage(), e);
        }
        if (workMs < 0 || workMs > MAX_WORK_MS) {
            throw new ResponseStatusException(HttpStatus.BAD_REQUEST, "workMs must be between 0 and " + MAX_WORK_MS);
        }
        return service.process(id, options, Duration.ofMillis(workMs));
    }

    /** Settles invoices with bounded concurrency, streaming one NDJSON line per invoice as it finishes. */
    @PostMapping(path = "/invoices/settle", produces = MediaType.APPLICATION_NDJSON_VALUE)
    Flux<SettleProgress> settle(@RequestBody SettleRequest request) {
        return service.settle(ids(request));
    }

    static List<Long> ids(SettleRequest request) {
        List<Long> ids = request.ids();
        Long from = request.from();
        Long to = request.to();
        if (ids != null && (from != null || to != null)) {
            throw badRequest("Give either ids or from/to, not both");
        }
        if (ids != null) {
            if (ids.isEmpty() || ids.size() > MAX_SETTLE) {
                throw badRequest("ids must hold 1 to " + MAX_SETTLE + " invoice ids");
            }
            if (ids.stream().distinct().count() != ids.size()) {
                throw badRequest("ids must not repeat an id");
            }
            ids.forEach(InvoiceController::requireId);
            return List.copyOf(ids);
        }
        if (from == null || to == null) {
            throw badRequest("Give ids, or both from and to");
        }
        requireId(from);
        requireId(to);
        if (to < from || to - from >= MAX_SETTLE) {
            throw badRequest("from..to must be ascending and span at most " + MAX_SETTLE + " ids");
        }
        List<Long> range = new ArrayList<>();
        for (long id = from; id <= to; id++) {
            range.add(id);
        }
        return range;
    }

    private static long requireId(@Nullable Long id) {
        if (id == null || id <= 0) {
            throw badRequest("An invoice id is a positive number, not " + id);
        }
        return id;
    }

    private static ResponseStatusException badRequest(String reason) {
        return new ResponseStatusException(HttpStatus.BAD_REQUEST, reason);
    }
}
