package dev.fenced.testservices;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

import org.jspecify.annotations.Nullable;

/**
 * A bare RESP client over one socket, so these tests depend on no Redis client library. Not thread-safe.
 * Reads time out after ten seconds unless told otherwise, so a broken server fails a test instead of
 * hanging it.
 */
final class RespConnection implements AutoCloseable {

    private static final int DEFAULT_READ_TIMEOUT_MILLIS = 10_000;

    private final Socket socket;
    private final InputStream in;
    private final OutputStream out;

    private RespConnection(Socket socket) throws IOException {
        this.socket = socket;
        this.in = new BufferedInputStream(socket.getInputStream());
        this.out = socket.getOutputStream();
    }

    static RespConnection open(String host, int port) throws IOException {
        Socket socket = new Socket();
        try {
            socket.connect(new InetSocketAddress(host, port), DEFAULT_READ_TIMEOUT_MILLIS);
            socket.setSoTimeout(DEFAULT_READ_TIMEOUT_MILLIS);
            return new RespConnection(socket);
        } catch (IOException e) {
            socket.close();
            throw e;
        }
    }

    /** Sends {@code arguments} as a RESP array of bulk strings; {@code send("PING")} writes {@code *1\r\n$4\r\nPING\r\n}. */
    void send(String... arguments) throws IOException {
        StringBuilder request = new StringBuilder("*").append(arguments.length).append("\r\n");
        for (String argument : arguments) {
            byte[] bytes = argument.getBytes(StandardCharsets.UTF_8);
            request.append('$').append(bytes.length).append("\r\n").append(argument).append("\r\n");
        }
        out.write(request.toString().getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    /**
     * Reads one reply: a simple string as {@code +TEXT}, an error as {@code -TEXT}, an integer as
     * {@code :N}, an array header as {@code *N} (read the elements with further calls), a bulk string as its
     * content, a null bulk string as {@code null}.
     */
    @Nullable String readReply() throws IOException {
        String line = readLine();
        if (line.startsWith("$")) {
            int length = Integer.parseInt(line.substring(1));
            if (length < 0) {
                return null;
            }
            byte[] content = in.readNBytes(length + 2);
            if (content.length < length + 2) {
                throw new EOFException("Connection closed in the middle of a bulk string");
            }
            return new String(content, 0, length, StandardCharsets.UTF_8);
        }
        return line;
    }

    @Nullable String command(String... arguments) throws IOException {
        send(arguments);
        return readReply();
    }

    void readTimeoutMillis(int millis) throws IOException {
        socket.setSoTimeout(millis);
    }

    /** Reads one byte straight from the socket: {@code -1} at end of stream. */
    int readByte() throws IOException {
        return in.read();
    }

    private String readLine() throws IOException {
        ByteArrayOutputStream line = new ByteArrayOutputStream();
        int previous = -1;
        while (true) {
            int next = in.read();
            if (next < 0) {
                throw new EOFException("Connection closed before the end of a reply line");
            }
            if (previous == '\r' && next == '\n') {
                byte[] bytes = line.toByteArray();
                return new String(bytes, 0, bytes.length - 1, StandardCharsets.UTF_8);
            }
            line.write(next);
            previous = next;
        }
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
