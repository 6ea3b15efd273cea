package dev.fenced.testservices;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A TCP proxy for fault injection in tests: clients connect to {@code 127.0.0.1:}{@link #port()} and
 * every connection is relayed to the target, until a test breaks it:
 * <ul>
 *   <li>{@link #blackhole()} holds traffic in both directions on existing and new connections, which stay
 *       open: a client sees no reply, no reset and no close, as during a network partition;</li>
 *   <li>{@link #resume()} relays again. Nothing is dropped: bytes held meanwhile (including a close by
 *       either side) are delivered in order, as TCP retransmission would after a short partition;</li>
 *   <li>{@link #resetAll()} aborts every current connection, so clients get a reset;</li>
 *   <li>{@link #refuseNew(boolean)} resets new connections as soon as they are accepted;</li>
 *   <li>{@link #retarget(String, int)} sends new connections elsewhere (clients moved over after a failover;
 *       {@link #resetAll()} moves the current ones);</li>
 *   <li>{@link #delayReplies(long)} holds every chunk the target sends for a while before relaying it;</li>
 *   <li>{@link #resetAfterRequestContaining(String, int)} resets a connection once the target answered a
 *       request containing a marker, before the client reads the reply: the command ran, its reply is lost;</li>
 *   <li>{@link #holdRequestContaining(String)} makes one connection silent from the request containing a
 *       marker on (the request is not relayed), the others relaying as before, until {@link #resume()};</li>
 *   <li>{@link #markRequestContaining(String)} and {@link #resetMarked()} reset the one connection that
 *       relayed a request containing a marker, later: while the target still works on it, say.</li>
 * </ul>
 * A connection whose target cannot be reached is reset too. The proxy uses blocking I/O on daemon
 * threads (one to accept, two per connection), fine for tests and unsuitable for anything else.
 *
 * <p>Thread-safe: every method may be called from any thread, including while traffic flows.
 */
public final class TcpProxy implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(TcpProxy.class);
    private static final int CONNECT_TIMEOUT_MILLIS = 5_000;
    private static final int BUFFER_SIZE = 8_192;
    private static final int ACCEPTOR_EXIT_WAIT_MILLIS = 5_000;

    // Written together by retarget(); a connection reads the pair once, when it opens.
    private volatile Target target;
    private final ServerSocket listener;
    private final Thread acceptor;
    private final Set<Connection> connections = ConcurrentHashMap.newKeySet();
    private final AtomicInteger connectionCount = new AtomicInteger();
    // Guards blackholed; relaying threads wait on it while blackholed.
    private final Object gate = new Object();
    private boolean blackholed;
    private volatile boolean refusingNew;
    private volatile long replyDelayMillis;
    private volatile String requestMarker = "";
    private final AtomicInteger armedResets = new AtomicInteger();
    private final AtomicInteger resetsFired = new AtomicInteger();
    private volatile String holdMarker = "";
    private final AtomicInteger armedHolds = new AtomicInteger();
    private volatile String resetMarker = "";
    private final AtomicInteger armedMarks = new AtomicInteger();
    private volatile boolean closed;

    private TcpProxy(Target target, ServerSocket listener) {
        this.target = target;
        this.listener = listener;
        this.acceptor = daemon("accept", this::acceptConnections);
    }

    /**
     * Starts a proxy on a free port of {@code 127.0.0.1} that relays to {@code targetHost:targetPort}. The
     * target is connected to once per accepted client, not now, so it may be down.
     *
     * @throws IllegalArgumentException if the port is out of range
     * @throws UncheckedIOException if no local port could be bound
     */
    public static TcpProxy start(String targetHost, int targetPort) {
        Target target = new Target(targetHost, targetPort);
        ServerSocket listener;
        try {
            listener = new ServerSocket(0, 50, Loopback.ADDRESS);
        } catch (IOException e) {
            throw new UncheckedIOException("Could not listen on " + Loopback.HOST + " for a proxy to "
                    + Urls.authority(targetHost, targetPort), e);
        }
        TcpProxy proxy = new TcpProxy(target, listener);
        proxy.acceptor.start();
        LOG.info("Proxying {}:{} to {}", Loopback.HOST, proxy.port(), Urls.authority(targetHost, targetPort));
        return proxy;
    }

    /** Always {@code 127.0.0.1}. */
    public String host() {
        return Loopback.HOST;
    }

    /** The port clients connect to, fixed for the life of the proxy. */
    public int port() {
        return listener.getLocalPort();
    }

    /**
     * Stops relaying bytes in both directions, on current connections and on those accepted later, without
     * closing anything. Bytes are held, not dropped, until {@link #resume()}. Idempotent.
     */
    public void blackhole() {
        synchronized (gate) {
            blackholed = true;
        }
        LOG.info("Proxy on port {} holds all traffic", port());
    }

    /**
     * Relays again, first delivering in order whatever was held since {@link #blackhole()} or on a connection
     * that {@link #holdRequestContaining(String)} made silent. Idempotent.
     */
    public void resume() {
        synchronized (gate) {
            blackholed = false;
            connections.forEach(c -> c.held = false);
            gate.notifyAll();
        }
        LOG.info("Proxy on port {} relays traffic again", port());
    }

    /**
     * Aborts every current connection on both sides, with a TCP reset where the platform allows
     * ({@code SO_LINGER} 0); bytes held by {@link #blackhole()} on them are lost. New connections are
     * accepted and relayed as before.
     */
    public void resetAll() {
        int count = 0;
        for (Connection connection : connections) {
            connection.abort();
            count++;
        }
        LOG.info("Proxy on port {} reset {} connection(s)", port(), count);
    }

    /**
     * While {@code refuse} is {@code true}, new connections are reset as soon as they are accepted: a
     * client's connect fails with a reset or, more often, succeeds and its first read or write fails.
     * Current connections are not touched.
     */
    public void refuseNew(boolean refuse) {
        refusingNew = refuse;
    }

    /**
     * Relays connections accepted from now on to {@code targetHost:targetPort}; current connections stay
     * where they are until {@link #resetAll()}.
     *
     * @throws IllegalArgumentException if the port is out of range
     */
    public void retarget(String targetHost, int targetPort) {
        target = new Target(targetHost, targetPort);
        LOG.info("Proxy on port {} now relays new connections to {}", port(), Urls.authority(targetHost, targetPort));
    }

    /** Holds every chunk the target sends {@code millis} before relaying it to the client; 0 relays at once. */
    public void delayReplies(long millis) {
        if (millis < 0) {
            throw new IllegalArgumentException("millis must not be negative, but is " + millis);
        }
        replyDelayMillis = millis;
    }

    /**
     * Arms the proxy: each of the next {@code count} connections whose request contains {@code marker} (read
     * as ISO-8859-1 within one chunk) is reset when the target's next reply arrives, which is not relayed. The
     * server ran the command; the client never learns its outcome.
     */
    public void resetAfterRequestContaining(String marker, int count) {
        Objects.requireNonNull(marker, "marker");
        requestMarker = marker;
        armedResets.set(count);
    }

    /**
     * Arms the proxy: the next connection whose request contains {@code marker} (read as ISO-8859-1 within one
     * chunk) holds that request and all later traffic in both directions, without closing anything, until
     * {@link #resume()}: one silent connection among live ones, as a half-dead pooled connection is. Other
     * connections are not touched.
     */
    public void holdRequestContaining(String marker) {
        Objects.requireNonNull(marker, "marker");
        holdMarker = marker;
        armedHolds.set(1);
    }

    /** How many connections {@link #holdRequestContaining(String)} holds now. */
    public int heldConnections() {
        return (int) connections.stream().filter(c -> c.held).count();
    }

    /**
     * Arms the proxy: the next connection whose request contains {@code marker} (read as ISO-8859-1 within one
     * chunk) is marked, and relays as before, until {@link #resetMarked()}.
     */
    public void markRequestContaining(String marker) {
        Objects.requireNonNull(marker, "marker");
        resetMarker = marker;
        armedMarks.set(1);
    }

    /**
     * Aborts the connections marked by {@link #markRequestContaining(String)}, as {@link #resetAll()} does.
     *
     * @return how many were reset
     */
    public int resetMarked() {
        int count = 0;
        for (Connection connection : connections) {
            if (connection.marked) {
                connection.abort();
                count++;
            }
        }
        LOG.info("Proxy on port {} reset {} marked connection(s)", port(), count);
        return count;
    }

    /** How many connections {@link #resetAfterRequestContaining(String, int)} has reset so far. */
    public int resetsFired() {
        return resetsFired.get();
    }

    /**
     * Stops listening and aborts every connection, as {@link #resetAll()} does; once it returns, new
     * connections to {@link #port()} are refused. Idempotent.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            listener.close();
        } catch (IOException e) {
            LOG.debug("Could not close the listener of the proxy on port {}", port(), e);
        }
        // The kernel keeps a socket listening while a thread is still inside accept() on it, even after
        // close(); waiting for the accepting thread to leave makes "closed" mean "refuses connections".
        try {
            acceptor.join(ACCEPTOR_EXIT_WAIT_MILLIS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        connections.forEach(Connection::abort);
        synchronized (gate) {
            gate.notifyAll();
        }
        LOG.info("Closed the proxy on port {}", port());
    }

    @Override
    public String toString() {
        Target t = target;
        return "TcpProxy[" + Loopback.HOST + ":" + port() + " -> " + Urls.authority(t.host(), t.port()) + "]";
    }

    private void acceptConnections() {
        while (!closed) {
            Socket client;
            try {
                client = listener.accept();
            } catch (IOException e) {
                if (!closed) {
                    LOG.warn("Proxy on port {} stopped accepting connections", port(), e);
                }
                return;
            }
            if (refusingNew || closed) {
                reset(client);
                continue;
            }
            Connection connection = new Connection(connectionCount.incrementAndGet(), client);
            connections.add(connection);
            if (closed) {
                // close() may have swept the connections just before this one was added.
                connection.abort();
                return;
            }
            daemon("connection-" + connection.id, connection::open).start();
        }
    }

    /**
     * Waits while traffic is held. Returns {@code false} if the connection or proxy was closed meanwhile
     * (or the thread interrupted), in which case the caller stops relaying.
     */
    private boolean awaitRelaying(Connection connection) {
        synchronized (gate) {
            while ((blackholed || connection.held) && !connection.aborted && !closed) {
                try {
                    gate.wait();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return false;
                }
            }
            return !connection.aborted && !closed;
        }
    }

    private Thread daemon(String role, Runnable task) {
        Thread thread = new Thread(task, "tcp-proxy-" + port() + "-" + role);
        thread.setDaemon(true);
        return thread;
    }

    /** Closes {@code socket} with a reset rather than the usual orderly close. */
    private static void reset(@Nullable Socket socket) {
        if (socket == null) {
            return;
        }
        try {
            socket.setSoLinger(true, 0);
        } catch (IOException e) {
            // Already closed, or the platform refuses: a plain close is the best left.
        }
        try {
            socket.close();
        } catch (IOException e) {
            // Nothing more can be done to a socket that fails to close.
        }
    }

    /** Where connections are relayed to. */
    private record Target(String host, int port) {

        Target {
            Objects.requireNonNull(host, "targetHost");
            if (port < 1 || port > 65_535) {
                throw new IllegalArgumentException("targetPort must be between 1 and 65535, but is " + port);
            }
        }
    }

    /** One client and its connection to the target. */
    private final class Connection {

        private final int id;
        private final Socket client;
        private volatile @Nullable Socket target;
        private volatile boolean aborted;
        private volatile boolean dropNextReply;
        // Set by holdRequestContaining (cleared by resume) and markRequestContaining.
        private volatile boolean held;
        private volatile boolean marked;
        // Directions that reached end of stream; at two, both sockets are closed in order.
        private final AtomicInteger finishedDirections = new AtomicInteger();

        Connection(int id, Socket client) {
            this.id = id;
            this.client = client;
        }

        void open() {
            Target to = TcpProxy.this.target;
            Socket socket = new Socket();
            try {
                client.setTcpNoDelay(true);
                socket.setTcpNoDelay(true);
                socket.connect(new InetSocketAddress(to.host(), to.port()), CONNECT_TIMEOUT_MILLIS);
            } catch (IOException e) {
                LOG.debug("Proxy on port {} could not reach {}; resetting the client",
                        port(), Urls.authority(to.host(), to.port()), e);
                reset(socket);
                abort();
                return;
            }
            target = socket;
            if (aborted) {
                // resetAll() or close() ran while connecting and could not see this socket.
                reset(socket);
                return;
            }
            daemon("connection-" + id + "-reply", () -> relay(socket, client, true)).start();
            relay(client, socket, false);
        }

        void abort() {
            aborted = true;
            connections.remove(this);
            reset(client);
            reset(target);
            synchronized (gate) {
                gate.notifyAll();
            }
        }

        private void relay(Socket from, Socket to, boolean reply) {
            byte[] buffer = new byte[BUFFER_SIZE];
            try {
                InputStream in = from.getInputStream();
                OutputStream out = to.getOutputStream();
                while (true) {
                    int read = in.read(buffer);
                    if (!reply && read > 0) {
                        watchForHoldAndMark(buffer, read);
                    }
                    if (!awaitRelaying(this)) {
                        return;
                    }
                    if (read < 0) {
                        to.shutdownOutput();
                        finishDirection();
                        return;
                    }
                    if (reply && !beforeReply()) {
                        return;
                    }
                    if (!reply) {
                        watchRequest(buffer, read);
                    }
                    out.write(buffer, 0, read);
                    out.flush();
                }
            } catch (IOException e) {
                // One side failed or was reset: the other side learns it the same way.
                if (!aborted) {
                    abort();
                }
            }
        }

        /** Arms a reset of this connection if the request chunk holds the marker and a reset is armed. */
        private void watchRequest(byte[] buffer, int read) {
            String marker = requestMarker;
            if (armedResets.get() > 0 && !marker.isEmpty()
                    && new String(buffer, 0, read, StandardCharsets.ISO_8859_1).contains(marker)
                    && armedResets.getAndDecrement() > 0) {
                dropNextReply = true;
            }
        }

        /** Holds or marks this connection if the request chunk holds an armed marker. */
        private void watchForHoldAndMark(byte[] buffer, int read) {
            if (armedHolds.get() <= 0 && armedMarks.get() <= 0) {
                return;
            }
            String chunk = new String(buffer, 0, read, StandardCharsets.ISO_8859_1);
            String hold = holdMarker;
            if (!hold.isEmpty() && chunk.contains(hold) && armedHolds.getAndDecrement() > 0) {
                held = true;
                LOG.info("Proxy on port {} holds connection {} from a request containing '{}'", port(), id, hold);
            }
            String mark = resetMarker;
            if (!mark.isEmpty() && chunk.contains(mark) && armedMarks.getAndDecrement() > 0) {
                marked = true;
            }
        }

        /** Applies the reply faults; returns {@code false} if the connection was reset instead of relaying. */
        private boolean beforeReply() {
            if (dropNextReply) {
                // The target ran the request: lose its reply the way a reset would.
                resetsFired.incrementAndGet();
                abort();
                return false;
            }
            long delay = replyDelayMillis;
            if (delay > 0) {
                try {
                    Thread.sleep(delay);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    abort();
                    return false;
                }
            }
            return true;
        }

        private void finishDirection() {
            if (finishedDirections.incrementAndGet() == 2) {
                connections.remove(this);
                closeQuietly(client);
                closeQuietly(target);
            }
        }

        private void closeQuietly(@Nullable Socket socket) {
            if (socket != null) {
                try {
                    socket.close();
                } catch (IOException e) {
                    LOG.debug("Could not close a proxied socket", e);
                }
            }
        }
    }
}
