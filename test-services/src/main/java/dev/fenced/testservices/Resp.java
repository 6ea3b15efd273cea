package dev.fenced.testservices;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * A minimal blocking RESP2 client for setting servers up in tests (cluster creation, replication,
 * Sentinel), so that test support needs no Redis driver. One command at a time; not thread-safe.
 */
final class Resp implements AutoCloseable {

    private final Socket socket;
    private final InputStream in;
    private final OutputStream out;

    private Resp(Socket socket) throws IOException {
        this.socket = socket;
        this.in = new BufferedInputStream(socket.getInputStream());
        this.out = socket.getOutputStream();
    }

    /** Connects to {@code 127.0.0.1:port} with a 2-second connect and read timeout. */
    static Resp connect(int port) throws IOException {
        Socket socket = new Socket();
        try {
            socket.connect(new InetSocketAddress(Loopback.ADDRESS, port), 2_000);
            socket.setSoTimeout(10_000);
            return new Resp(socket);
        } catch (IOException e) {
            socket.close();
            throw e;
        }
    }

    /**
     * Runs one command on a new connection and returns its reply.
     *
     * @throws UncheckedIOException if the server cannot be reached
     * @throws IllegalStateException if the server answers with an error
     */
    static @Nullable Object call(int port, String... args) {
        try (Resp resp = connect(port)) {
            return resp.command(args);
        } catch (IOException e) {
            throw new UncheckedIOException("Redis at port " + port + " did not answer " + String.join(" ", args), e);
        }
    }

    /**
     * Sends a command and reads its reply: a String (simple or bulk), a Long, a List, or {@code null}.
     *
     * @throws IllegalStateException if the server answers with an error
     */
    @Nullable Object command(String... args) throws IOException {
        ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        buffer.write(("*" + args.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
        for (String arg : args) {
            byte[] bytes = arg.getBytes(StandardCharsets.UTF_8);
            buffer.write(("$" + bytes.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
            buffer.write(bytes);
            buffer.write("\r\n".getBytes(StandardCharsets.US_ASCII));
        }
        out.write(buffer.toByteArray());
        out.flush();
        return read(String.join(" ", args));
    }

    private @Nullable Object read(String command) throws IOException {
        int type = in.read();
        if (type < 0) {
            throw new IOException("Connection closed while waiting for the reply to " + command);
        }
        String line = line();
        switch (type) {
            case '+':
                return line;
            case '-':
                throw new IllegalStateException("Redis answered " + command + " with: " + line);
            case ':':
                return Long.parseLong(line);
            case '$': {
                int length = Integer.parseInt(line);
                if (length < 0) {
                    return null;
                }
                byte[] bytes = in.readNBytes(length + 2);
                return new String(bytes, 0, length, StandardCharsets.UTF_8);
            }
            case '*': {
                int count = Integer.parseInt(line);
                if (count < 0) {
                    return null;
                }
                List<@Nullable Object> items = new ArrayList<>(count);
                for (int i = 0; i < count; i++) {
                    items.add(read(command));
                }
                return items;
            }
            default:
                throw new IOException("Unexpected RESP type '" + (char) type + "' in the reply to " + command);
        }
    }

    private String line() throws IOException {
        StringBuilder sb = new StringBuilder();
        int c;
        while ((c = in.read()) >= 0) {
            if (c == '\r') {
                in.read();
                return sb.toString();
            }
            sb.append((char) c);
        }
        throw new IOException("Connection closed in the middle of a reply");
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
