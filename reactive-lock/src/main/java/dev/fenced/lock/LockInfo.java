package dev.fenced.lock;

import java.time.Duration;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * One held lock in the fleet view ({@link FencedLockClient#locks(String)}), read from the lock server: whoever
 * holds it, in this process or any other. It never shows the holder's owner id: that is a capability (whoever
 * knows it could release or renew the lease), so the view shows a holder label instead.
 *
 * @param name the lock name
 * @param token the holder's fencing token
 * @param remaining the holder's remaining lease time by the lock server's clock (the key's {@code PTTL} on Redis,
 *     {@code expires_at} against the database's clock on PostgreSQL) when it was read; a lease that is renewed
 *     goes on past it
 * @param holderLabel the description of the holder's instance that its client stored with the grant
 *     ({@link FencedLockClientBuilder#holderLabel(String)}), or {@code null} when it stored none
 * @param waiters how many acquires of the client that read the view wait for this lock now (waiters of other
 *     instances are not known to it)
 */
public record LockInfo(String name, long token, Duration remaining, @Nullable String holderLabel, int waiters) {

    /** Validates. */
    public LockInfo {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(remaining, "remaining");
    }
}
