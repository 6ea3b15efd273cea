package dev.fenced.lock.internal.redis;

import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.NettyCustomizer;
import io.netty.channel.Channel;
import io.netty.handler.flush.FlushConsolidationHandler;

/**
 * The Netty resources of a Lettuce client that a store creates and owns.
 *
 * <p>They differ from Lettuce's defaults in one way: every channel consolidates the flushes asked for while
 * it reads. A lock command is most often sent from a reply's callback (a release after the acquire's reply,
 * the next acquire of a loop after a release), that is on the connection's event loop while it decodes a
 * read that may carry many replies; Lettuce flushes each command as it is written, one {@code write} system
 * call per command, and Redis then reads them one by one. With the flushes of a read held until the read
 * completes, the commands its callbacks send leave in one write and Redis reads them together: the same
 * commands in the same order, with fewer system calls on both sides. A flush asked for outside a read (a
 * command from an application thread) goes out at once, so a lone command waits for nothing; during a long
 * read, every {@value #MAX_HELD_FLUSHES}th flush goes out too.
 */
final class LockClientResources {

    /**
     * Flushes held during one read before they go out anyway. Holding every flush of a long read sends the
     * commands in one write but only when the read ends: the client and Redis then work in turn, each idle
     * while the other handles the whole batch. Going out every 16 commands lets Redis start on the first while
     * the client still decodes the rest; on the benchmark's 64 pairs in flight (2 cores) 16 gave about 1.5 times
     * the throughput of holding them all, and more than 8 or 32.
     */
    static final int MAX_HELD_FLUSHES = 16;

    private LockClientResources() {
    }

    /**
     * New resources, owned by the caller, who shuts them down after the client that uses them.
     *
     * @return the resources
     */
    static ClientResources create() {
        return ClientResources.builder().nettyCustomizer(new NettyCustomizer() {
            @Override
            public void afterChannelInitialized(Channel channel) {
                // First in the pipeline: it must see a read begin before Lettuce's handlers decode it.
                channel.pipeline().addFirst(new FlushConsolidationHandler(MAX_HELD_FLUSHES, false));
            }
        }).build();
    }
}
