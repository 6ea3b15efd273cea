package dev.fenced.lock.internal;

import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The storage of leases: what the lease lifecycle needs from a lock service, and nothing more. Every method
 * is cold. Implementations: {@link dev.fenced.lock.internal.redis.RedisLeaseStore},
 * {@link dev.fenced.lock.internal.postgres.PostgresLeaseStore} and
 * {@link dev.fenced.lock.internal.memory.InMemoryLeaseStore}; one contract test suite checks them all.
 *
 * <p>Implementations are thread-safe.
 */
public interface LeaseStore {

    /**
     * Tries to take the lock for {@code owner}. If the lock is free, mints the next token (moving the
     * counter past {@code floor} first) and sets the lock to {@code owner:token} for {@code leaseMillis}.
     * If the lock already holds {@code owner}, refreshes its expiry and returns its token (a retried
     * acquire is idempotent). Otherwise reports the holder's remaining time.
     *
     * @param name the lock name
     * @param owner the owner id of this acquisition
     * @param leaseMillis the lease time
     * @param floor a token the next token must exceed, or 0
     * @return the reply
     */
    Mono<AcquireReply> acquire(String name, String owner, long leaseMillis, long floor);

    /**
     * Tries to take many locks at once, each as {@link #acquire} does: each request keeps its own owner, lease time
     * and floor, and gets its own reply or its own failure. A store that can do it sends one call for all of them
     * (one acquire-script call on one Redis server); this default sends each request as a call of its own, all at
     * once, and collects the replies.
     *
     * @param requests the acquires, at least one
     * @return for each request, in the same order, its reply or its failure; the Mono itself never fails: a call
     *     that failed as a whole is that failure for each of its requests
     */
    default Mono<List<AcquireResult>> acquireAll(List<AcquireRequest> requests) {
        return Flux.fromIterable(requests)
                .flatMapSequential(r -> acquire(r.name(), r.owner(), r.leaseMillis(), r.floor())
                        .map(AcquireResult::of)
                        .onErrorResume(e -> Mono.just(AcquireResult.failed(e))), Math.max(1, requests.size()))
                .collectList();
    }

    /**
     * One acquire of {@link #acquireAll}.
     *
     * @param name the lock name
     * @param owner the owner id of this acquisition
     * @param leaseMillis the lease time
     * @param floor a token the next token must exceed, or 0
     */
    record AcquireRequest(String name, String owner, long leaseMillis, long floor) {
    }

    /**
     * The result of one acquire of {@link #acquireAll}: its reply, or its failure.
     *
     * @param reply the reply, or {@code null} when it failed
     * @param failure why it failed, or {@code null}
     */
    record AcquireResult(@Nullable AcquireReply reply, @Nullable Throwable failure) {

        /**
         * A reply.
         *
         * @param reply the reply
         * @return the result
         */
        public static AcquireResult of(AcquireReply reply) {
            return new AcquireResult(reply, null);
        }

        /**
         * A failure.
         *
         * @param failure the failure
         * @return the result
         */
        public static AcquireResult failed(Throwable failure) {
            return new AcquireResult(null, failure);
        }
    }

    /**
     * Extends every lease whose lock still holds its {@code owner:token}, in one round trip where the
     * store allows.
     *
     * @param leases the leases to renew
     * @return for each lease, in the same order, whether it was still held (and is now extended)
     */
    Mono<List<Boolean>> renew(List<RenewRequest> leases);

    /**
     * Deletes the lock if it holds {@code owner:token} (or, with a {@code null} token, any token of
     * {@code owner}), and notifies waiters.
     *
     * @param name the lock name
     * @param owner the owner id
     * @param token the token, or {@code null} to match any token of this owner (to undo an acquire whose
     *     reply never arrived)
     * @return whether the lock was held and deleted
     */
    Mono<Boolean> release(String name, String owner, @Nullable Long token);

    /**
     * Releases many leases at once, each as {@link #release} does (owner- and token-checked, its waiters notified),
     * each with its own result. A store that can do it sends one call for all of them (one release-script call on
     * one Redis server); this default sends each release as a call of its own, all at once, and collects the
     * results.
     *
     * @param requests the releases, at least one
     * @return for each request, in the same order, whether its lock held it and was deleted, or its failure; the
     *     Mono itself never fails: a call that failed as a whole is that failure for each of its requests
     */
    default Mono<List<ReleaseResult>> releaseAll(List<ReleaseRequest> requests) {
        return Flux.fromIterable(requests)
                .flatMapSequential(r -> release(r.name(), r.owner(), r.token())
                        .map(ReleaseResult::of)
                        .onErrorResume(e -> Mono.just(ReleaseResult.failed(e))), Math.max(1, requests.size()))
                .collectList();
    }

    /**
     * One release of {@link #releaseAll}.
     *
     * @param name the lock name
     * @param owner the owner id
     * @param token the token, or {@code null} to match any token of this owner
     */
    record ReleaseRequest(String name, String owner, @Nullable Long token) {
    }

    /**
     * The result of one release of {@link #releaseAll}: whether the lock held the lease and was deleted, or the
     * failure.
     *
     * @param released whether it was deleted, or {@code null} when the release failed
     * @param failure why it failed, or {@code null}
     */
    record ReleaseResult(@Nullable Boolean released, @Nullable Throwable failure) {

        /**
         * A release that ran.
         *
         * @param released whether the lock held the lease and was deleted
         * @return the result
         */
        public static ReleaseResult of(boolean released) {
            return new ReleaseResult(released, null);
        }

        /**
         * A failure.
         *
         * @param failure the failure
         * @return the result
         */
        public static ReleaseResult failed(Throwable failure) {
            return new ReleaseResult(null, failure);
        }
    }

    /**
     * Releases a lock that {@code owner:token} holds and tries to take it for {@code nextOwner}, as
     * {@link #acquire} does: a hand-off from a lease of this client to its next waiter for the lock. A store that
     * can do it in one atomic step takes the lock over without notifying other waiters (the lock stays taken);
     * this default releases, then acquires, in two steps, and another client may take the lock in between.
     *
     * @param name the lock name
     * @param owner the releasing lease's owner id
     * @param token the releasing lease's token
     * @param nextOwner the owner id of the next acquisition
     * @param leaseMillis the next lease's time
     * @param floor a token the next token must exceed, or 0
     * @return whether the releasing lease held the lock, and the next owner's acquire reply or its failure; the
     *     returned Mono fails only when whether the release happened is unknown
     */
    default Mono<Handoff> handOff(String name, String owner, long token, String nextOwner, long leaseMillis, long floor) {
        return release(name, owner, token).flatMap(released -> acquire(name, nextOwner, leaseMillis, floor)
                .map(next -> new Handoff(released, next, null))
                .onErrorResume(e -> Mono.just(new Handoff(released, null, e))));
    }

    /**
     * The reply to {@link #handOff}.
     *
     * @param released whether the releasing lease held the lock (and no longer does)
     * @param next the next owner's acquire reply, or {@code null} when its acquire failed
     * @param nextFailure why the next owner's acquire failed, or {@code null}
     */
    record Handoff(boolean released, @Nullable AcquireReply next, @Nullable Throwable nextFailure) {
    }

    /**
     * Watches releases of a lock. On subscription the store starts listening; once listening is
     * confirmed, the flux emits the current notification count, then a higher count after every
     * release it hears of. Notifications are at-most-once: callers also use a timer. Cancelling stops
     * listening when no other watcher of the lock remains.
     *
     * @param name the lock name
     * @return the notification counts
     */
    Flux<Long> releases(String name);

    /**
     * A hot signal of servers that lost what they held: emits a description each time the store finds that
     * the server it talks to changed identity (a restart, a failover, a reload of older data), before it
     * emits a grant of the new server. Every lease held there may be gone. Never errors.
     *
     * @return the changes
     */
    Flux<String> serverChanges();

    /**
     * Whether a failed command certainly never reached the server (refused while disconnected, no connection
     * could be opened, the store was closed), so that it changed nothing there: an acquire that failed so needs
     * no undo. A timeout or a reset may come after the command ran.
     *
     * @param error the failure of a command of this store
     * @return whether the command never left
     */
    default boolean neverSent(Throwable error) {
        return false;
    }

    /**
     * How long after an acquire failed without a reply (a timeout, a reset) it may still take the lock in the
     * server: the undo of such an acquire goes on for this long after the failure, and does not stop at its
     * first "nothing held". Zero when an undo that got a reply comes after anything the acquire could still do
     * (on Redis the undo follows the acquire on the same connection, and a server runs one command at a time).
     *
     * @return the window, zero or more
     */
    default java.time.Duration lateGrantWindow() {
        return java.time.Duration.ZERO;
    }

    /**
     * Whether the calling thread is one of the store's I/O threads, where nothing may block.
     *
     * @return whether it is
     */
    default boolean onIoThread() {
        return false;
    }

    /**
     * The fleet view: every lock held now whose name matches {@code pattern}, as the server sees it, read in pages
     * of at most {@link FleetPages#PAGE_SIZE} locks (Redis {@code SCAN} with a bounded {@code COUNT}, every primary
     * of a cluster in turn; keyset pages of the lease table), each page fetched on demand: a slow subscriber holds
     * at most one page beyond the one it is reading. A lock held during the whole listing is listed once; one taken
     * or freed meanwhile may or may not be. Cold.
     *
     * @param pattern the names to list
     * @return the held locks
     */
    Flux<LockState> locks(NamePattern pattern);

    /**
     * One lock of the fleet view: the lock {@code name} if it is held now.
     *
     * @param name the lock name
     * @return its state, or empty when it is free
     */
    Mono<LockState> lock(String name);

    /**
     * Breaks a lock, whoever holds it, in one atomic step: deletes it and leaves the name's token counter at least
     * at the broken holder's token, so that the next grant's token is above it; notifies waiters. The broken
     * holder's renewals and release then find it not held. Idempotent: on a free lock it changes nothing.
     *
     * @param name the lock name
     * @return what was broken
     */
    default Mono<Broken> breakLock(String name) {
        return breakLock(name, 0);
    }

    /**
     * As {@link #breakLock(String)}, but only while the lock holds {@code expectedToken}: a lock held with another
     * token (the next holder's, once the expected one was broken or released) changes nothing and answers
     * {@link Broken#NOTHING}, as a free lock does.
     *
     * @param name the lock name
     * @param expectedToken the token to break, 0 for whichever the lock holds
     * @return what was broken
     */
    Mono<Broken> breakLock(String name, long expectedToken);

    /**
     * A held lock as the store sees it. The owner id is never part of it: it is a capability (whoever knows it
     * could release or renew the lease).
     *
     * @param name the lock name
     * @param token the holder's fencing token
     * @param remainingMillis the holder's remaining lease time by the server's clock, in milliseconds
     * @param holderLabel the label the holder's client stored with the grant, or {@code null}
     */
    record LockState(String name, long token, long remainingMillis, @Nullable String holderLabel) {
    }

    /**
     * What {@link #breakLock} found.
     *
     * @param held whether the lock was held (and is broken now)
     * @param token the broken holder's token, 0 when the lock was free
     * @param holderLabel the broken holder's label, or {@code null}
     */
    record Broken(boolean held, long token, @Nullable String holderLabel) {

        /** Nothing was held. */
        public static final Broken NOTHING = new Broken(false, 0, null);
    }

    /**
     * One round trip to the server.
     *
     * @return completion when the server answered
     */
    Mono<Void> ping();

    /**
     * Closes connections. Commands sent afterwards fail.
     *
     * @return completion
     */
    Mono<Void> close();

    /**
     * The reply to {@link #acquire}.
     *
     * @param acquired whether the lock is now held by the owner
     * @param token the token when acquired, else 0
     * @param holderTtlMillis the holder's remaining time when not acquired (negative if unknown)
     */
    record AcquireReply(boolean acquired, long token, long holderTtlMillis) {

        /**
         * A successful reply.
         *
         * @param token the token
         * @return the reply
         */
        public static AcquireReply acquired(long token) {
            return new AcquireReply(true, token, 0);
        }

        /**
         * The lock is held by someone else.
         *
         * @param holderTtlMillis the holder's remaining time
         * @return the reply
         */
        public static AcquireReply busy(long holderTtlMillis) {
            return new AcquireReply(false, 0, holderTtlMillis);
        }
    }

    /**
     * One lease to renew.
     *
     * @param name the lock name
     * @param owner the owner id
     * @param token the token
     * @param leaseMillis the new lease time
     */
    record RenewRequest(String name, String owner, long token, long leaseMillis) {
    }
}
