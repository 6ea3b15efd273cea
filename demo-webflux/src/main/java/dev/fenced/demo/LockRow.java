package dev.fenced.demo;

import org.jspecify.annotations.Nullable;

/**
 * One held lock in the locks panel: a {@code LockInfo} of the fleet view, and whether the demo paused its holder.
 *
 * @param name the lock name
 * @param token the holder's fencing token
 * @param remainingMs the holder's remaining lease time by the lock server's clock, when read
 * @param holderLabel the holder's label, if its client stored one
 * @param waiters how many acquires of the application's lock client wait for it
 * @param stalled whether the demo paused its holder on purpose (the page offers "break this lock" then)
 */
public record LockRow(String name, long token, long remainingMs, @Nullable String holderLabel, int waiters,
        boolean stalled) {
}
