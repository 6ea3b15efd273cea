package dev.fenced.testservices;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.UnknownHostException;

/** The IPv4 loopback address that every server started here binds to. Stateless, so thread-safe. */
final class Loopback {

    /** {@code 127.0.0.1}, spelled out so that no name resolution or IPv6 preference can change it. */
    static final String HOST = "127.0.0.1";

    static final InetAddress ADDRESS = address();

    private Loopback() {
    }

    /**
     * A TCP port that was free on {@link #HOST} a moment ago. Another process may take it before the caller
     * binds it, so callers that start a server retry on a failure.
     */
    static int freePort() {
        try (ServerSocket socket = new ServerSocket(0, 1, ADDRESS)) {
            return socket.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException("Could not find a free TCP port on " + HOST, e);
        }
    }

    private static InetAddress address() {
        try {
            return InetAddress.getByAddress(HOST, new byte[] {127, 0, 0, 1});
        } catch (UnknownHostException e) {
            throw new AssertionError("Four bytes are always a valid IPv4 address", e);
        }
    }
}
