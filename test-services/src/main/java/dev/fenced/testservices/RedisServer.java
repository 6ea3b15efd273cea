package dev.fenced.testservices;

import java.net.URI;
import java.net.URISyntaxException;
import java.util.Objects;

import org.jspecify.annotations.Nullable;

/**
 * The address of a Redis server that tests can use, and where it came from. Resolved by
 * {@link RedisServerExtension}. Immutable and thread-safe.
 */
public final class RedisServer {

    static final int DEFAULT_PORT = 6379;

    private final String host;
    private final int port;
    private final ServiceSource source;

    RedisServer(String host, int port, ServiceSource source) {
        this.host = Objects.requireNonNull(host, "host");
        this.port = port;
        this.source = Objects.requireNonNull(source, "source");
    }

    /**
     * Reads a {@code redis://host[:port]} URI taken from the environment variable {@code variable}.
     *
     * @throws IllegalArgumentException if {@code value} is not of that form; the message names the variable
     */
    static RedisServer fromEnvironment(String variable, String value) {
        URI uri;
        try {
            uri = new URI(value.strip());
        } catch (URISyntaxException e) {
            throw invalid(variable, value);
        }
        boolean emptyPath = uri.getRawPath() == null || uri.getRawPath().isEmpty() || uri.getRawPath().equals("/");
        if (!"redis".equalsIgnoreCase(uri.getScheme()) || uri.getHost() == null || uri.getRawUserInfo() != null
                || !emptyPath || uri.getRawQuery() != null || uri.getRawFragment() != null) {
            throw invalid(variable, value);
        }
        int port = Urls.port(uri, DEFAULT_PORT);
        if (port == -1) {
            throw invalid(variable, value);
        }
        return new RedisServer(Urls.host(uri), port, ServiceSource.ENVIRONMENT);
    }

    private static IllegalArgumentException invalid(String variable, String value) {
        return new IllegalArgumentException(
                variable + " must be redis://host[:port] (no password, database or options), but is '" + value + "'");
    }

    /** The host name or IP address to connect to, without brackets for IPv6. */
    public String host() {
        return host;
    }

    /** The TCP port to connect to. */
    public int port() {
        return port;
    }

    /** The server as {@code redis://host:port}, the form Lettuce's {@code RedisURI.create} accepts. */
    public String uri() {
        return "redis://" + Urls.authority(host, port);
    }

    /** Where this server came from. */
    public ServiceSource source() {
        return source;
    }

    @Override
    public boolean equals(@Nullable Object other) {
        return other instanceof RedisServer that
                && host.equals(that.host) && port == that.port && source == that.source;
    }

    @Override
    public int hashCode() {
        return Objects.hash(host, port, source);
    }

    @Override
    public String toString() {
        return uri() + " (" + source + ")";
    }
}
