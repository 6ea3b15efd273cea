package dev.fenced.torture;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;

/**
 * A TCP proxy on {@code 127.0.0.1} for the nemesis, with the faults test-services' {@code TcpProxy} lacks:
 * it can be pointed at another target (clients "moved over" after a failover), delay replies, and reset a
 * connection right after the server executed a chosen command but before the client read the reply.
 *
 * <ul>
 *   <li>{@link #retarget} changes where new connections go; call {@link #resetAll()} to move existing ones;</li>
 *   <li>{@link #blackhole()} / {@link #resume()} hold and release traffic in both directions (a partition);</li>
 *   <li>{@link #delayReplies(long)} holds every reply chunk that long before relaying it;</li>
 *   <li>{@link #resetAfterRequestContaining(String, int)} arms the proxy: the next {@code count} connections whose
 *       request contains the marker are reset when the reply arrives, so the command ran but its reply is lost.</li>
 * </ul>
 *
 * <p>Blocking I/O on daemon threads (two per connection). Thread-safe.
 */
final class FaultProxy implements AutoCloseable {

    private static final int BUFFER = 8_192;

    private final ServerSocket listener;
    private final Set<Link> links = ConcurrentHashMap.newKeySet();
    private final Object gate = new Object();
    private final AtomicInteger ids = new AtomicInteger();
    private final AtomicInteger armed = new AtomicInteger();
    private final AtomicInteger resetsFired = new AtomicInteger();
    private volatile String marker = "";
    private volatile String targetHost;
    private volatile int targetPort;
    private volatile long replyDelayMillis;
    private boolean blackholed; // guarded by gate
    private volatile boolean closed;

    private FaultProxy(ServerSocket listener, String targetHost, int targetPort) {
        this.listener = listener;
        this.targetHost = targetHost;
        this.targetPort = targetPort;
    }

    /** Starts a proxy on a free local port that relays to {@code targetHost:targetPort}. */
    static FaultProxy start(String targetHost, int targetPort) {
        try {
            FaultProxy proxy = new FaultProxy(new ServerSocket(0, 64, InetAddress.getLoopbackAddress()), targetHost, targetPort);
            daemon("fault-proxy-" + proxy.port() + "-accept", proxy::accept).start();
            return proxy;
        } catch (IOException e) {
            throw new UncheckedIOException("Could not open a fault proxy", e);
        }
    }

    int port() {
        return listener.getLocalPort();
    }

    String uri() {
        return "redis://127.0.0.1:" + port();
    }

    int targetPort() {
        return targetPort;
    }

    /** New connections go to {@code host:port}; existing ones stay where they are. */
    synchronized void retarget(String host, int port) {
        this.targetHost = host;
        this.targetPort = port;
    }

    void blackhole() {
        synchronized (gate) {
            blackholed = true;
        }
    }

    void resume() {
        synchronized (gate) {
            blackholed = false;
            gate.notifyAll();
        }
    }

    void delayReplies(long millis) {
        this.replyDelayMillis = millis;
    }

    /** Arms a reset of the next {@code count} connections whose request contains {@code requestMarker}. */
    void resetAfterRequestContaining(String requestMarker, int count) {
        this.marker = requestMarker;
        armed.set(count);
    }

    /** How many connections were reset after an armed request reached the server. */
    int resetsFired() {
        return resetsFired.get();
    }

    /** Aborts every current connection with a reset; held bytes are lost. */
    void resetAll() {
        for (Link link : links) {
            link.abort();
        }
    }

    @Override
    public void close() {
        closed = true;
        try {
            listener.close();
        } catch (IOException e) {
            // Closing a listener that already failed: nothing left to free.
        }
        resetAll();
        resume();
    }

    private void accept() {
        while (!closed) {
            Socket client;
            try {
                client = listener.accept();
            } catch (IOException e) {
                return;
            }
            Link link = new Link(client);
            links.add(link);
            daemon("fault-proxy-" + port() + "-link-" + ids.incrementAndGet(), link::open).start();
        }
    }

    /** Waits while blackholed; false once the link is aborted. */
    private boolean awaitOpen(Link link) {
        synchronized (gate) {
            while (blackholed && !link.aborted && !closed) {
                try {
                    gate.wait();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return false;
                }
            }
            return !link.aborted && !closed;
        }
    }

    private static Thread daemon(String name, Runnable task) {
        Thread thread = new Thread(task, name);
        thread.setDaemon(true);
        return thread;
    }

    private static void reset(@Nullable Socket socket) {
        if (socket == null) {
            return;
        }
        try {
            socket.setSoLinger(true, 0);
        } catch (IOException e) {
            // Already closed: a plain close is all that is left.
        }
        try {
            socket.close();
        } catch (IOException e) {
            // Nothing more to do for a socket that fails to close.
        }
    }

    /** One client connection and its connection to the target. */
    private final class Link {

        private final Socket client;
        private volatile @Nullable Socket target;
        private volatile boolean aborted;
        private volatile boolean dropNextReply;

        Link(Socket client) {
            this.client = client;
        }

        void open() {
            Socket socket = new Socket();
            try {
                client.setTcpNoDelay(true);
                socket.setTcpNoDelay(true);
                socket.connect(new InetSocketAddress(targetHost, targetPort), 2_000);
            } catch (IOException e) {
                reset(socket);
                abort();
                return;
            }
            target = socket;
            if (aborted) {
                reset(socket);
                return;
            }
            daemon(Thread.currentThread().getName() + "-reply", () -> relay(socket, client, true)).start();
            relay(client, socket, false);
        }

        void abort() {
            aborted = true;
            links.remove(this);
            reset(client);
            reset(target);
            synchronized (gate) {
                gate.notifyAll();
            }
        }

        private void relay(Socket from, Socket to, boolean reply) {
            byte[] buffer = new byte[BUFFER];
            try {
                InputStream in = from.getInputStream();
                OutputStream out = to.getOutputStream();
                while (true) {
                    int read = in.read(buffer);
                    if (read < 0 || !awaitOpen(this)) {
                        abort();
                        return;
                    }
                    if (reply) {
                        if (dropNextReply) {
                            // The server executed the request: lose its reply the way a reset would.
                            resetsFired.incrementAndGet();
                            abort();
                            return;
                        }
                        long delay = replyDelayMillis;
                        if (delay > 0) {
                            TimeUnit.MILLISECONDS.sleep(delay);
                        }
                    } else if (armed.get() > 0 && !marker.isEmpty()
                            && new String(buffer, 0, read, StandardCharsets.ISO_8859_1).contains(marker)
                            && armed.getAndDecrement() > 0) {
                        dropNextReply = true;
                    }
                    out.write(buffer, 0, read);
                    out.flush();
                }
            } catch (IOException e) {
                abort();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                abort();
            }
        }
    }
}
