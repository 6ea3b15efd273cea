package dev.fenced.lock;

import org.jspecify.annotations.Nullable;

/**
 * Storage rejected a write because it already holds a newer fencing token for the lock (or the same
 * token from another owner, which a lock service that lost data can re-issue): a newer holder has
 * written since this lease was granted. Nothing of the rejected write was applied.
 *
 * <p>Immutable and thread-safe.
 */
public final class StaleFencingTokenException extends FencedLockException {

    private static final long serialVersionUID = 1L;

    private final String target;
    private final long presentedToken;
    private final long storedToken;
    private final @Nullable String storedOwner;

    private StaleFencingTokenException(String lockName, String target, long presentedToken, long storedToken,
            @Nullable String storedOwner) {
        super(lockName, "Write to " + target + " with fencing token " + presentedToken + " of lock '" + lockName
                + "' was rejected: storage holds token " + storedToken
                + (storedToken == presentedToken ? " from another owner" : ""), null);
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
        return new StaleFencingTokenException(lockName, target, presentedToken, storedToken, storedOwner);
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
