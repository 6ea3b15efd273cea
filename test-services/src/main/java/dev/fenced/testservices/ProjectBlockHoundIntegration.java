package dev.fenced.testservices;

import io.netty.util.concurrent.FastThreadLocalThread;
import reactor.blockhound.BlockHound;
import reactor.blockhound.BlockingOperationError;
import reactor.blockhound.integration.BlockHoundIntegration;

/**
 * The project's BlockHound rules, loaded through {@code META-INF/services} in every module whose tests
 * depend on this one:
 * <ul>
 *   <li>Netty's threads (Lettuce's event loops) are non-blocking, like Reactor's parallel and single
 *       schedulers, so the suites prove that nothing blocks where Lettuce delivers replies;</li>
 *   <li>the JDK reads {@code net.properties} once, in a class initializer, when the first socket of the JVM
 *       is created; whichever thread does that first (an event loop, in a test that only talks to servers
 *       named in the environment) is allowed to;</li>
 *   <li>Lettuce 6.8 guards its command queue with a short in-memory lock ({@code SharedLock}); a thread that
 *       sends a command while another does may park on it for the few instructions the holder needs. That is
 *       contention on a field update, not I/O, and failing it inside Lettuce would leave the connection
 *       unusable, so its two entry points are allowed;</li>
 *   <li>a Lettuce client being shut down stops its event executors (and its latency collector's timer) from one
 *       of them, which takes a queue lock for a moment;</li>
 *   <li>Lettuce's cluster client sets up a new node connection under a short in-memory lock
 *       ({@code PooledClusterConnectionProvider}), and Netty's adaptive buffer allocator takes a short lock
 *       when it grows; both are allowed;</li>
 *   <li>every other blocking call prints its full stack before it fails, since libraries often catch the
 *       error and log only its message.</li>
 * </ul>
 */
public final class ProjectBlockHoundIntegration implements BlockHoundIntegration {

    @Override
    public void applyTo(BlockHound.Builder builder) {
        builder.nonBlockingThreadPredicate(current -> current.or(thread -> thread instanceof FastThreadLocalThread));
        builder.allowBlockingCallsInside("sun.net.NetProperties", "loadDefaultProperties");
        builder.allowBlockingCallsInside("io.lettuce.core.protocol.SharedLock", "incrementWriters");
        builder.allowBlockingCallsInside("io.lettuce.core.protocol.SharedLock", "doExclusive");
        // The cluster client guards its node-connection cache with a lock held for a few field reads and writes.
        builder.allowBlockingCallsInside("io.lettuce.core.cluster.PooledClusterConnectionProvider$NodeConnectionPostProcessor",
                "lambda$apply$4");
        for (String method : new String[] {"lambda$getWriteConnection$0", "lambda$getReadConnection$4", "getReadConnection",
            "resetFastConnectionCache", "setPartitions"}) {
            builder.allowBlockingCallsInside("io.lettuce.core.cluster.PooledClusterConnectionProvider", method);
        }
        // Lettuce builds a connection's synchronous API proxy under a lock (Sentinel connections do at connect).
        builder.allowBlockingCallsInside("io.lettuce.core.internal.AbstractInvocationHandler$MethodTranslator", "of");
        // Closing a client on an event loop shuts its renewal scheduler down, which takes the JDK executor's
        // queue lock for a moment.
        builder.allowBlockingCallsInside("java.util.concurrent.ThreadPoolExecutor", "tryTerminate");
        // Shutting a Lettuce client down finishes on one of its own event executors, which shuts the others down:
        // Netty enqueues a wake-up task under the target executor's short queue lock.
        builder.allowBlockingCallsInside("io.netty.util.concurrent.SingleThreadEventExecutor", "shutdownGracefully");
        // With LatencyUtils on the class path, a Lettuce client's shutdown stops its latency collector's timer from
        // an event executor, which takes the JDK executor's queue lock for a moment.
        builder.allowBlockingCallsInside("io.lettuce.core.metrics.DefaultCommandLatencyCollector", "shutdown");
        // Netty 4.2's adaptive allocator takes a short write lock when it adds a buffer magazine.
        builder.allowBlockingCallsInside("io.netty.buffer.AdaptivePoolingAllocator$MagazineGroup", "tryExpandMagazines");
        // Reactor Netty probes Netty's native epoll library once per JVM, reading it from its jar (then falls back to NIO).
        builder.allowBlockingCallsInside("io.netty.channel.epoll.Native", "loadNativeLibrary");
        builder.blockingMethodCallback(method -> {
            new Exception("Blocking call " + method + " on thread " + Thread.currentThread().getName()).printStackTrace();
            throw new BlockingOperationError(method);
        });
    }
}
