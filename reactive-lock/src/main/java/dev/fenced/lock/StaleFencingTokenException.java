package dev.fenced.lock;

import org.jspecify.annotations.Nullable;

/**
 * Storage rejected a write because of the token it already holds for the lock: a newer token, or the same
 * token from another owner (which a lock service that lost data can re-issue) — in both cases another holder
 * has written since this lease was granted — or, under a strict rule, the same token from the same lease,
 * which may write only once. Nothing of the rejected write was applied.
 *
 * <p>Immutable and thread-safe.
 */
public final class StaleFencingTokenException extends FencedLockException {

    private static final long serialVersionUID = 1L;

    private final String target;
    private final long presentedToken;
    private final long storedToken;
    private final @Nullable String storedOwner;

    private StaleFencingTokenException(String lockName, String target, long presentedToken, @Nullable String presentedOwner,
            long storedToken, @Nullable String storedOwner) {
        super(lockName, "Write to " + target + " with fencing token " + presentedToken + " of lock '" + lockName
                + "' was rejected: storage holds token " + storedToken
                + sameTokenDetail(presentedToken, presentedOwner, storedToken, storedOwner), null);
        this.target = target;
        this.presentedToken = presentedToken;
        this.storedToken = storedToken;
        this.storedOwner = storedOwner;
    }

    /**
     * Creates the exception.
     *
     * @param lockName the lock whose lease made the write
     * @param target what was written, for the message, such as {@code "invoices (id = 42)"}
     * @param presentedToken the token the write carried
     * @param storedToken the token storage holds
     * @param storedOwner the owner of the stored token, if known
     * @return a new exception
     */
    public static StaleFencingTokenException of(String lockName, String target, long presentedToken, long storedToken,
            @Nullable String storedOwner) {
        return new StaleFencingTokenException(lockName, target, presentedToken, null, storedToken, storedOwner);
    }

    /**
     * Creates the exception, knowing the owner that presented the token, so that the message can tell a token
     * re-issued to another owner from a second write of the same lease.
     *
     * @param lockName the lock whose lease made the write
     * @param target what was written, for the message
     * @param presentedToken the token the write carried
     * @param presentedOwner the owner id of the lease that wrote
     * @param storedToken the token storage holds
     * @param storedOwner the owner of the stored token, if known
     * @return a new exception
     */
    public static StaleFencingTokenException of(String lockName, String target, long presentedToken, String presentedOwner,
            long storedToken, @Nullable String storedOwner) {
        return new StaleFencingTokenException(lockName, target, presentedToken, presentedOwner, storedToken, storedOwner);
    }

    private static String sameTokenDetail(long presentedToken, @Nullable String presentedOwner, long storedToken,
            @Nullable String storedOwner) {
        if (storedToken != presentedToken || presentedOwner == null) {
            return "";
        }
        return presentedOwner.equals(storedOwner) ? " from this same lease (the strict rule accepts one write per token)"
                : " from another owner";
    }

    /**
     * What was written, such as {@code "invoices (id = 42)"}.
     *
     * @return the target
     */
    public String target() {
        return target;
    }

    /**
     * The token the rejected write carried.
     *
     * @return the presented token
     */
    public long presentedToken() {
        return presentedToken;
    }

    /**
     * The token storage holds, at least the presented one.
     *
     * @return the stored token
     */
    public long storedToken() {
        return storedToken;
    }

    /**
     * The owner id stored with {@link #storedToken()}, if storage keeps it.
     *
     * @return the stored owner, or {@code null}
     */
    public @Nullable String storedOwner() {
        return storedOwner;
    }
}
