package dev.fenced.demo;

import dev.fenced.r2dbc.FencedRowNotFoundException;
import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.LockAcquireTimeoutException;
import dev.fenced.lock.LockServiceException;
import dev.fenced.lock.StaleFencingTokenException;
import java.net.URI;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.ProblemDetail;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.RestControllerAdvice;
import org.springframework.web.reactive.result.method.annotation.ResponseEntityExceptionHandler;

/**
 * Maps errors to RFC 9457 problem details ({@code application/problem+json}). Spring's own errors (a bad path
 * variable, an unreadable body, a {@code ResponseStatusException}) become problem details through the base
 * class; Fenced's errors are mapped here:
 *
 * <ul>
 *   <li>the lock is busy (the wait ran out, or a single attempt found it held): 409 with {@code Retry-After};
 *   <li>storage rejected the write's token ({@link StaleFencingTokenException}, also when it arrives as the cause
 *       of the {@link LeaseLostException} that {@code withLease} reports): 409;
 *   <li>the lease was lost otherwise, or Redis cannot be used: 503;
 *   <li>no such invoice: 404;
 *   <li>an argument the lock client rejects ({@link IllegalArgumentException}): 400.
 * </ul>
 */
@RestControllerAdvice
class ProblemDetailsAdvice extends ResponseEntityExceptionHandler {

    static final String RETRY_AFTER_SECONDS = "1";

    @ExceptionHandler(LockAcquireTimeoutException.class)
    ResponseEntity<ProblemDetail> lockTimeout(LockAcquireTimeoutException e) {
        ProblemDetail problem = problem(HttpStatus.CONFLICT, "lock-busy", "Lock busy",
                "Lock " + e.lockName() + " stayed held for the whole wait of " + e.waited().toMillis() + " ms");
        problem.setProperty("lockName", e.lockName());
        problem.setProperty("waitedMs", e.waited().toMillis());
        return ResponseEntity.status(HttpStatus.CONFLICT).header(HttpHeaders.RETRY_AFTER, RETRY_AFTER_SECONDS).body(problem);
    }

    @ExceptionHandler(LockBusyException.class)
    ResponseEntity<ProblemDetail> lockBusy(LockBusyException e) {
        ProblemDetail problem = problem(HttpStatus.CONFLICT, "lock-busy", "Lock busy", e.getMessage());
        problem.setProperty("lockName", e.lockName());
        return ResponseEntity.status(HttpStatus.CONFLICT).header(HttpHeaders.RETRY_AFTER, RETRY_AFTER_SECONDS).body(problem);
    }

    @ExceptionHandler(StaleFencingTokenException.class)
    ResponseEntity<ProblemDetail> stale(StaleFencingTokenException e) {
        return ResponseEntity.status(HttpStatus.CONFLICT).body(staleProblem(e));
    }

    @ExceptionHandler(LeaseLostException.class)
    ResponseEntity<ProblemDetail> leaseLost(LeaseLostException e) {
        if (e.getCause() instanceof StaleFencingTokenException stale) {
            return ResponseEntity.status(HttpStatus.CONFLICT).body(staleProblem(stale));
        }
        ProblemDetail problem = problem(HttpStatus.SERVICE_UNAVAILABLE, "lease-lost", "Lease lost", e.getMessage());
        problem.setProperty("lockName", e.lockName());
        problem.setProperty("token", e.token());
        problem.setProperty("reason", e.reason().name());
        return ResponseEntity.status(HttpStatus.SERVICE_UNAVAILABLE).body(problem);
    }

    @ExceptionHandler(LockServiceException.class)
    ResponseEntity<ProblemDetail> lockService(LockServiceException e) {
        ProblemDetail problem = problem(HttpStatus.SERVICE_UNAVAILABLE, "lock-service-unavailable",
                "Lock service unavailable", e.getMessage());
        problem.setProperty("operation", e.operation());
        return ResponseEntity.status(HttpStatus.SERVICE_UNAVAILABLE).body(problem);
    }

    /** The lock client rejects bad arguments (a lease time it cannot renew, a bad lock name) this way. */
    @ExceptionHandler(IllegalArgumentException.class)
    ResponseEntity<ProblemDetail> badArgument(IllegalArgumentException e) {
        return ResponseEntity.status(HttpStatus.BAD_REQUEST)
                .body(problem(HttpStatus.BAD_REQUEST, "bad-request", "Bad Request", String.valueOf(e.getMessage())));
    }

    @ExceptionHandler(InvoiceNotFoundException.class)
    ResponseEntity<ProblemDetail> notFound(InvoiceNotFoundException e) {
        ProblemDetail problem = problem(HttpStatus.NOT_FOUND, "invoice-not-found", "Invoice not found", e.getMessage());
        problem.setProperty("invoiceId", e.id());
        return ResponseEntity.status(HttpStatus.NOT_FOUND).body(problem);
    }

    @ExceptionHandler(FencedRowNotFoundException.class)
    ResponseEntity<ProblemDetail> rowNotFound(FencedRowNotFoundException e) {
        return ResponseEntity.status(HttpStatus.NOT_FOUND)
                .body(problem(HttpStatus.NOT_FOUND, "invoice-not-found", "Invoice not found", e.getMessage()));
    }

    private static ProblemDetail staleProblem(StaleFencingTokenException e) {
        ProblemDetail problem = problem(HttpStatus.CONFLICT, "stale-fencing-token", "Stale fencing token", e.getMessage());
        problem.setProperty("lockName", e.lockName());
        problem.setProperty("presentedToken", e.presentedToken());
        problem.setProperty("storedToken", e.storedToken());
        return problem;
    }

    private static ProblemDetail problem(HttpStatus status, String type, String title, String detail) {
        ProblemDetail problem = ProblemDetail.forStatusAndDetail(status, detail);
        problem.setType(URI.create("https://fenced.dev/problems/" + type));
        problem.setTitle(title);
        return problem;
    }
}
