package dev.fenced.demo;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import java.net.InetSocketAddress;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import reactor.core.publisher.Mono;

/**
 * A TCP relay on 127.0.0.1 in front of one server, whose traffic can be stalled and resumed: while stalled it
 * reads nothing from either side, so bytes wait in the socket buffers, exactly as they would during a network
 * stall or while the process on one end is paused. The scenario routes worker A's connections (to Redis and to
 * PostgreSQL) through relays to pause worker A without touching the servers or worker B.
 *
 * <p>Stalling is honest about what it affects: nothing is dropped or reordered, and connections stay open.
 * Thread-safe.
 */
final class StallableRelay {

    private final Channel server;
    private final Set<Channel> channels = ConcurrentHashMap.newKeySet();
    private volatile boolean stalled;
    private final java.util.Set<Pipe> pipes = java.util.concurrent.ConcurrentHashMap.newKeySet();

    private StallableRelay(Channel server) {
        this.server = server;
    }

    /** Opens a relay to {@code targetHost:targetPort}; emits once it listens. */
    static Mono<StallableRelay> open(EventLoopGroup group, String targetHost, int targetPort) {
        return Mono.create(sink -> {
            StallableRelay[] relay = new StallableRelay[1];
            ServerBootstrap bootstrap = new ServerBootstrap()
                    .group(group)
                    .channel(NioServerSocketChannel.class)
                    .childOption(ChannelOption.AUTO_READ, false)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel inbound) {
                            relay[0].connect(inbound, targetHost, targetPort);
                        }
                    });
            bootstrap.bind("127.0.0.1", 0).addListener((ChannelFutureListener) bound -> {
                if (bound.isSuccess()) {
                    relay[0] = new StallableRelay(bound.channel());
                    sink.success(relay[0]);
                } else {
                    sink.error(bound.cause());
                }
            });
        });
    }

    /** The port clients connect to. */
    int port() {
        return ((InetSocketAddress) server.localAddress()).getPort();
    }

    /** Stops moving bytes in both directions, on every connection, until {@link #resume()}. */
    void stall() {
        stalled = true;
        channels.forEach(c -> c.config().setAutoRead(false));
    }

    /** Moves bytes again; what waited is delivered in order. */
    void resume() {
        stalled = false;
        pipes.forEach(Pipe::deliverHeld);
        channels.forEach(c -> c.config().setAutoRead(true));
    }

    /** Closes the listening socket and every relayed connection. */
    Mono<Void> close() {
        return Mono.create(sink -> {
            channels.forEach(Channel::close);
            server.close().addListener(f -> sink.success());
        });
    }

    private void connect(Channel inbound, String host, int port) {
        channels.add(inbound);
        inbound.closeFuture().addListener(f -> channels.remove(inbound));
        new Bootstrap()
                .group(inbound.eventLoop())
                .channel(NioSocketChannel.class)
                .option(ChannelOption.AUTO_READ, false)
                .handler(new Pipe(inbound, StallableRelay.this))
                .connect(host, port)
                .addListener((ChannelFutureListener) connected -> {
                    if (!connected.isSuccess()) {
                        inbound.close();
                        return;
                    }
                    Channel outbound = connected.channel();
                    channels.add(outbound);
                    outbound.closeFuture().addListener(f -> channels.remove(outbound));
                    inbound.pipeline().addLast(new Pipe(outbound, StallableRelay.this));
                    boolean read = !stalled;
                    inbound.config().setAutoRead(read);
                    outbound.config().setAutoRead(read);
                });
    }

    /**
     * Writes what one side reads to the other side, and closes the other side when this one closes. Turning
     * auto-read off takes effect on the event loop a little later, so bytes read while the relay is stalled
     * are held here, and delivered in order on resume.
     */
    private static final class Pipe extends ChannelInboundHandlerAdapter {

        private final Channel peer;
        private final StallableRelay relay;
        // Confined to the channel's event loop.
        private final java.util.ArrayDeque<Object> held = new java.util.ArrayDeque<>();

        Pipe(Channel peer, StallableRelay relay) {
            this.peer = peer;
            this.relay = relay;
            relay.pipes.add(this);
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object message) {
            if (relay.stalled || !held.isEmpty()) {
                held.add(message);
                if (!relay.stalled) {
                    flush();
                }
                return;
            }
            peer.writeAndFlush(message);
        }

        /** Delivers what was held, on the event loop of the side that read it. */
        void deliverHeld() {
            peer.eventLoop().execute(this::flush);
        }

        private void flush() {
            Object message;
            while ((message = held.poll()) != null) {
                peer.writeAndFlush(message);
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            relay.pipes.remove(this);
            flush();
            peer.close();
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close();
        }
    }
}
