package dev.fenced.testservices;

import io.netty.util.concurrent.FastThreadLocalThread;
import reactor.blockhound.BlockHound;
import reactor.blockhound.integration.BlockHoundIntegration;

/**
 * The project's BlockHound rules, loaded through {@code META-INF/services} in every module whose tests
 * depend on this one:
 * <ul>
 *   <li>Netty's threads (Lettuce's event loops) are non-blocking, like Reactor's parallel and single
 *       schedulers, so the suites prove that nothing blocks where Lettuce delivers replies;</li>
 *   <li>the JDK reads {@code net.properties} once, in a class initializer, when the first socket of the JVM
 *       is created; whichever thread does that first (an event loop, in a test that only talks to servers
 *       named in the environment) is allowed to.</li>
 * </ul>
 */
public final class ProjectBlockHoundIntegration implements BlockHoundIntegration {

    @Override
    public void applyTo(BlockHound.Builder builder) {
        builder.nonBlockingThreadPredicate(current -> current.or(thread -> thread instanceof FastThreadLocalThread));
        builder.allowBlockingCallsInside("sun.net.NetProperties", "loadDefaultProperties");
    }
}
