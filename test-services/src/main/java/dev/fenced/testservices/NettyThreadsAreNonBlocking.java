package dev.fenced.testservices;

import io.netty.util.concurrent.FastThreadLocalThread;
import reactor.blockhound.BlockHound;
import reactor.blockhound.integration.BlockHoundIntegration;

/**
 * Makes BlockHound treat Netty's threads (Lettuce's event loops) as non-blocking, like Reactor's
 * parallel and single schedulers, so the suite proves that nothing blocks where Lettuce delivers
 * replies. Loaded by BlockHound through {@code META-INF/services} in every module whose tests depend on
 * this one.
 */
public final class NettyThreadsAreNonBlocking implements BlockHoundIntegration {

    @Override
    public void applyTo(BlockHound.Builder builder) {
        builder.nonBlockingThreadPredicate(current -> current.or(thread -> thread instanceof FastThreadLocalThread));
    }
}
