package dev.fenced.spring;

import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.ForceReleaseResult;
import dev.fenced.lock.LockInfo;
import java.util.List;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.actuate.endpoint.Access;
import org.springframework.boot.actuate.endpoint.InvalidEndpointRequestException;
import org.springframework.boot.actuate.endpoint.OperationResponseBody;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.boot.actuate.endpoint.annotation.Selector;
import org.springframework.boot.actuate.endpoint.annotation.WriteOperation;
import reactor.core.publisher.Mono;

/**
 * The Actuator endpoint {@code fencedlocks}: the fleet view of the locks under the client's key prefix, held by any
 * instance and read from the lock server ({@link FencedLockClient#locks(String)}), and force-release
 * ({@link FencedLockClient#forceRelease(String, String)}) as a write operation.
 *
 * <ul>
 *   <li>{@code GET /actuator/fencedlocks?pattern=invoice:*&limit=100}: the held locks whose names match
 *       ({@code *} for any run of characters; default {@code *}), at most {@code limit} of them (default
 *       {@value #DEFAULT_LIMIT}, at most {@value #MAX_LIMIT}), with {@code truncated} telling whether there were
 *       more;</li>
 *   <li>{@code GET /actuator/fencedlocks/{name}}: one lock, 404 when it is not held;</li>
 *   <li>{@code POST /actuator/fencedlocks/{name}} with {@code {"reason": "..."}}: breaks the lock. The endpoint's
 *       default access is {@link Access#READ_ONLY}, so this operation does not exist until
 *       {@code management.endpoint.fencedlocks.access=unrestricted} is set, or
 *       {@code management.endpoints.access.default=unrestricted} (which alone enables it, as every endpoint's
 *       write operations), and {@code management.endpoints.access.max-permitted} allows it: nobody can break locks
 *       on a default install.</li>
 * </ul>
 * Owner ids are never shown. Operations return {@link Mono}s: nothing blocks a request thread.
 *
 * <p>Thread-safe.
 */
@Endpoint(id = "fencedlocks", defaultAccess = Access.READ_ONLY)
public final class FencedLocksEndpoint {

    /** The most locks one read lists when no limit is given. */
    public static final int DEFAULT_LIMIT = 1_000;

    /** The most locks one read lists at all: the view streams, but the answer is one JSON document. */
    public static final int MAX_LIMIT = 10_000;

    private final FencedLockClient client;

    /**
     * An endpoint over {@code client}.
     *
     * @param client the lock client whose key prefix and lock server the endpoint reads
     */
    public FencedLocksEndpoint(FencedLockClient client) {
        this.client = Objects.requireNonNull(client, "client must not be null");
    }

    /**
     * The held locks whose names match {@code pattern}.
     *
     * @param pattern the names ({@code *} for any run of characters), or {@code null} for all
     * @param limit the most locks to list, 1 to {@value #MAX_LIMIT}, or {@code null} for {@value #DEFAULT_LIMIT}
     * @return the locks, in the lock server's order; {@link InvalidEndpointRequestException} (400) for a bad
     *     pattern or limit
     */
    @ReadOperation
    public Mono<Locks> locks(@Nullable String pattern, @Nullable Integer limit) {
        int most = limit == null ? DEFAULT_LIMIT : limit;
        if (most < 1 || most > MAX_LIMIT) {
            String message = "limit must be between 1 and " + MAX_LIMIT + ", was " + most;
            return Mono.error(new InvalidEndpointRequestException(message, message));
        }
        String names = pattern == null || pattern.isEmpty() ? "*" : pattern;
        return client.locks(names)
                .take(most + 1L)
                .map(FencedLocksEndpoint::lock)
                .collectList()
                .map(locks -> locks.size() > most ? new Locks(names, locks.subList(0, most), true) : new Locks(names, locks, false))
                .onErrorMap(IllegalArgumentException.class, FencedLocksEndpoint::badRequest);
    }

    /**
     * One lock by name.
     *
     * @param name the lock name
     * @return the lock, or empty (404) when it is not held
     */
    @ReadOperation
    public Mono<Lock> lock(@Selector String name) {
        return client.lock(name).map(FencedLocksEndpoint::lock).onErrorMap(IllegalArgumentException.class, FencedLocksEndpoint::badRequest);
    }

    /**
     * Breaks a lock: with {@code token} (the one {@code GET} showed) only while the lock holds that token
     * ({@link FencedLockClient#forceRelease(String, long, String)}), so that a retried request never breaks the next
     * holder; without it, whoever holds the lock when the request arrives
     * ({@link FencedLockClient#forceRelease(String, String)}, which says exactly what that guarantees). Available
     * only with {@code management.endpoint.fencedlocks.access=unrestricted} or
     * {@code management.endpoints.access.default=unrestricted} (either alone enables it).
     *
     * @param name the lock name
     * @param reason who breaks it and why, for the log and the observation: required
     * @param token the token of the holder to break, positive; absent to break whoever holds the lock
     * @return the outcome: {@code RELEASED}, or {@code NOT_HELD} when the lock was not held (with that token)
     */
    @WriteOperation
    public Mono<ForceRelease> forceRelease(@Selector String name, String reason, @Nullable Long token) {
        Mono<ForceReleaseResult> result = token == null ? client.forceRelease(name, reason)
                : client.forceRelease(name, token, reason);
        return result
                .map(r -> new ForceRelease(r.name(), r.outcome(), r.token(), r.holderLabel(), r.reason()))
                .onErrorMap(IllegalArgumentException.class, FencedLocksEndpoint::badRequest);
    }

    /** A bad name, pattern or reason: a 400 with the library's message. */
    private static InvalidEndpointRequestException badRequest(IllegalArgumentException e) {
        return new InvalidEndpointRequestException(String.valueOf(e.getMessage()), String.valueOf(e.getMessage()));
    }

    private static Lock lock(LockInfo info) {
        return new Lock(info.name(), info.token(), info.remaining().toMillis(), info.holderLabel(), info.waiters());
    }

    /**
     * The answer of a listing.
     *
     * @param pattern the pattern listed
     * @param locks the held locks, at most the limit
     * @param truncated whether more locks matched than the limit
     */
    public record Locks(String pattern, List<Lock> locks, boolean truncated) implements OperationResponseBody {
    }

    /**
     * One held lock.
     *
     * @param name the lock name
     * @param token the holder's fencing token
     * @param remainingMillis the holder's remaining lease time by the lock server's clock, in milliseconds
     * @param holderLabel the holder's label, or {@code null}
     * @param waiters how many acquires of this application wait for it
     */
    public record Lock(String name, long token, long remainingMillis, @Nullable String holderLabel, int waiters)
            implements OperationResponseBody {
    }

    /**
     * The answer of a force-release.
     *
     * @param name the lock name
     * @param outcome {@code RELEASED} or {@code NOT_HELD}
     * @param token the broken holder's token, 0 when nothing was held
     * @param holderLabel the broken holder's label, or {@code null}
     * @param reason the reason given
     */
    public record ForceRelease(String name, ForceReleaseResult.Outcome outcome, long token, @Nullable String holderLabel,
            String reason) implements OperationResponseBody {
    }
}
