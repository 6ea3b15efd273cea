package dev.fenced.lock.internal.redis;

import static org.assertj.core.api.Assertions.assertThat;

import io.lettuce.core.resource.ClientResources;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.util.ReferenceCountUtil;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The channels of a client the store owns send the commands that reply callbacks write during one read in one
 * flush at the end of the read (in chunks during a long read), and a command written outside a read at once.
 */
class LockClientResourcesTest {

    /** Stands in for Lettuce's command handler: every reply it reads makes a callback write and flush a command. */
    private static final class RepliesSendCommands extends ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object reply) {
            ReferenceCountUtil.release(reply);
            ctx.channel().writeAndFlush(Unpooled.copiedBuffer("command", StandardCharsets.US_ASCII));
        }
    }

    @Test
    void commandsWrittenWhileReadingLeaveTogetherWhenTheReadCompletesAndALoneCommandLeavesAtOnce() throws Exception {
        ClientResources resources = LockClientResources.create();
        try {
            EmbeddedChannel channel = new EmbeddedChannel();
            resources.nettyCustomizer().afterChannelInitialized(channel);
            channel.pipeline().addLast(new RepliesSendCommands());

            channel.pipeline().fireChannelRead(Unpooled.copiedBuffer("reply 1", StandardCharsets.US_ASCII));
            channel.pipeline().fireChannelRead(Unpooled.copiedBuffer("reply 2", StandardCharsets.US_ASCII));
            channel.pipeline().fireChannelRead(Unpooled.copiedBuffer("reply 3", StandardCharsets.US_ASCII));
            channel.runPendingTasks();
            assertThat(channel.outboundMessages()).as("nothing flushed while the read is in progress").isEmpty();

            channel.pipeline().fireChannelReadComplete();
            assertThat(channel.outboundMessages()).as("the three commands, flushed once at the end of the read").hasSize(3);
            channel.outboundMessages().forEach(ReferenceCountUtil::release);
            channel.outboundMessages().clear();

            for (int i = 0; i < LockClientResources.MAX_HELD_FLUSHES + 4; i++) {
                channel.pipeline().fireChannelRead(Unpooled.copiedBuffer("reply", StandardCharsets.US_ASCII));
            }
            assertThat(channel.outboundMessages()).as("a long read sends its commands in chunks, not all at its end")
                    .hasSize(LockClientResources.MAX_HELD_FLUSHES);
            channel.pipeline().fireChannelReadComplete();
            assertThat(channel.outboundMessages()).hasSize(LockClientResources.MAX_HELD_FLUSHES + 4);
            channel.outboundMessages().forEach(ReferenceCountUtil::release);
            channel.outboundMessages().clear();

            channel.writeAndFlush(Unpooled.copiedBuffer("lone command", StandardCharsets.US_ASCII));
            ByteBuf lone = channel.readOutbound();
            assertThat(lone).as("a command written outside a read is flushed at once").isNotNull();
            lone.release();
            channel.finishAndReleaseAll();
        } finally {
            resources.shutdown(0, 1, TimeUnit.SECONDS).get();
        }
    }
}
