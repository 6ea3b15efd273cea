package dev.fenced.testservices;

import java.net.URI;
import java.net.URISyntaxException;
import java.util.Objects;

import org.jspecify.annotations.Nullable;

/**
 * The address and credentials of a MariaDB (or MySQL) database that tests can use, and where it came from.
 * Resolved by {@link MariaDbServerExtension}. Immutable and thread-safe.
 */
public final class MariaDbServer {

    static final int DEFAULT_PORT = 3306;

    private final String host;
    private final int port;
    private final String database;
    private final String username;
    private final String password;
    private final ServiceSource source;

    MariaDbServer(String host, int port, String database, String username, String password, ServiceSource source) {
        this.host = Objects.requireNonNull(host, "host");
        this.port = port;
        this.database = Objects.requireNonNull(database, "database");
        this.username = Objects.requireNonNull(username, "username");
        this.password = Objects.requireNonNull(password, "password");
        this.source = Objects.requireNonNull(source, "source");
    }

    /**
     * Reads a {@code mariadb://user[:password]@host[:port]/database} URL (scheme {@code mysql} also accepted,
     * parts percent-encoded) taken from the environment variable {@code variable}.
     *
     * @throws IllegalArgumentException if {@code value} is not of that form; the message names the variable
     *     but never repeats the value, which may hold a password
     */
    static MariaDbServer fromEnvironment(String variable, String value) {
        URI url;
        try {
            url = new URI(value.strip());
        } catch (URISyntaxException e) {
            throw invalid(variable);
        }
        String scheme = url.getScheme();
        String userInfo = url.getRawUserInfo();
        String path = url.getRawPath();
        if (!("mariadb".equalsIgnoreCase(scheme) || "mysql".equalsIgnoreCase(scheme)) || url.getHost() == null
                || userInfo == null || userInfo.isEmpty() || userInfo.startsWith(":")
                || path == null || path.length() < 2 || path.indexOf('/', 1) >= 0
                || url.getRawQuery() != null || url.getRawFragment() != null) {
            throw invalid(variable);
        }
        int port = Urls.port(url, DEFAULT_PORT);
        if (port == -1) {
            throw invalid(variable);
        }
        int colon = userInfo.indexOf(':');
        String username = Urls.decode(colon < 0 ? userInfo : userInfo.substring(0, colon));
        String password = colon < 0 ? "" : Urls.decode(userInfo.substring(colon + 1));
        return new MariaDbServer(Urls.host(url), port, Urls.decode(path.substring(1)), username, password,
                ServiceSource.ENVIRONMENT);
    }

    private static IllegalArgumentException invalid(String variable) {
        return new IllegalArgumentException(
                variable + " must be mariadb://user[:password]@host[:port]/database (no options)");
    }

    /** The host name or IP address to connect to, without brackets for IPv6. */
    public String host() {
        return host;
    }

    /** The TCP port to connect to. */
    public int port() {
        return port;
    }

    /** The name of the database to use. */
    public String database() {
        return database;
    }

    /** The user to log in as. */
    public String username() {
        return username;
    }

    /** The password of {@link #username()}; the empty string when the server does not ask for one. */
    public String password() {
        return password;
    }

    /**
     * The R2DBC URL {@code r2dbc:mariadb://user@host:port/database}, with credentials so that
     * {@code ConnectionFactories.get(url)} is enough: the password follows the user as {@code user:password@}
     * when it is not empty. Parts are percent-encoded.
     */
    public String r2dbcUrl() {
        String credentials = Urls.encode(username) + (password.isEmpty() ? "" : ":" + Urls.encode(password));
        return "r2dbc:mariadb://" + credentials + "@" + Urls.authority(host, port) + "/" + Urls.encode(database);
    }

    /** Where this server came from. */
    public ServiceSource source() {
        return source;
    }

    @Override
    public boolean equals(@Nullable Object other) {
        return other instanceof MariaDbServer that
                && host.equals(that.host) && port == that.port && database.equals(that.database)
                && username.equals(that.username) && password.equals(that.password) && source == that.source;
    }

    @Override
    public int hashCode() {
        return Objects.hash(host, port, database, username, password, source);
    }

    /** The server without its password, safe to log. */
    @Override
    public String toString() {
        return "mariadb://" + username + "@" + Urls.authority(host, port) + "/" + database + " (" + source + ")";
    }
}
