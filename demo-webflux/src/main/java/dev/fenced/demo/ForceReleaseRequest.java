package dev.fenced.demo;

/**
 * The body of {@code POST /locks/force-release}.
 *
 * @param name the lock to break
 * @param reason who breaks it and why, for the log (required by {@code FencedLockClient.forceRelease})
 */
public record ForceReleaseRequest(String name, String reason) {
}
