package dev.fenced.lock.internal;

import reactor.blockhound.BlockHound;
import reactor.blockhound.integration.BlockHoundIntegration;

/**
 * What Fenced does on non-blocking threads that BlockHound would mistake for blocking: reading
 * {@code /dev/urandom} for an {@linkplain OwnerIds owner id}, a read that never waits once the kernel is
 * seeded. Loaded by BlockHound through {@code META-INF/services} when it is on the class path; unused
 * otherwise.
 */
public final class FencedBlockHoundIntegration implements BlockHoundIntegration {

    /** Called by BlockHound's service loader. */
    public FencedBlockHoundIntegration() {
    }

    @Override
    public void applyTo(BlockHound.Builder builder) {
        builder.allowBlockingCallsInside(OwnerIds.class.getName(), "next");
    }
}
