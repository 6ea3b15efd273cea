package dev.fenced.lock.internal;

import java.security.SecureRandom;
import java.util.HexFormat;

/**
 * Owner ids: 128 bits of fresh kernel entropy per acquisition, as 32 lower-case hex digits.
 *
 * <p>Nothing is derived from state kept in the process: two processes restored from one snapshot (CRaC
 * checkpoint/restore, Lambda SnapStart) share every in-memory seed and counter, so an id built from a
 * per-client seed and a sequence would repeat in both, and the acquire script, which treats a matching
 * owner as a retry, would let both hold one lock with one token. {@link SecureRandom} (NativePRNG on Linux)
 * mixes bytes read from {@code /dev/urandom} into every draw, and refills after a restore. Reading
 * {@code /dev/urandom} never waits once the kernel is seeded; {@link FencedBlockHoundIntegration} tells
 * BlockHound so.
 *
 * <p>The fixed width keeps {@code owner:token} unambiguous and no owner a prefix of another.
 *
 * <p>Thread-safe.
 */
final class OwnerIds {

    /** The length of every owner id, in characters. */
    static final int LENGTH = 32;

    private static final HexFormat HEX = HexFormat.of();

    private final SecureRandom random = new SecureRandom();

    /**
     * A new owner id.
     *
     * @return 32 lower-case hex digits
     */
    String next() {
        byte[] bytes = new byte[LENGTH / 2];
        random.nextBytes(bytes);
        return HEX.formatHex(bytes);
    }
}
