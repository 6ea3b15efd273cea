package dev.fenced.testservices;

import java.util.Objects;

import org.jspecify.annotations.Nullable;

/**
 * The address and credentials of a PostgreSQL database that tests can use, and where it came from.
 * Resolved by {@link PostgresServerExtension}. Immutable and thread-safe.
 */
public final class PostgresServer {

    static final int DEFAULT_PORT = 5432;

    private final String host;
    private final int port;
    private final String database;
    private final String username;
    private final String password;
    private final ServiceSource source;

    PostgresServer(String host, int port, String database, String username, String password, ServiceSource source) {
        this.host = Objects.requireNonNull(host, "host");
        this.port = port;
        this.database = Objects.requireNonNull(database, "database");
        this.username = Objects.requireNonNull(username, "username");
        this.password = Objects.requireNonNull(password, "password");
        this.source = Objects.requireNonNull(source, "source");
    }

    /**
     * Reads a {@code postgresql://user[:password]@host[:port]/database} URL (scheme {@code postgres} also
     * accepted, parts percent-encoded) taken from the environment variable {@code variable}.
     *
     * @throws IllegalArgumentException if {@code value} is not of that form; the message names the variable
     *     but never repeats the value, which may hold a password
     */
    static PostgresServer fromEnvironment(String variable, String value) {
        Urls.DatabaseUrl url = Urls.DatabaseUrl.parse(variable, value, DEFAULT_PORT, "postgresql", "postgres");
        return new PostgresServer(url.host(), url.port(), url.database(), url.username(), url.password(), ServiceSource.ENVIRONMENT);
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
     * The JDBC URL {@code jdbc:postgresql://host:port/database}, without credentials: pass
     * {@link #username()} and {@link #password()} to the driver.
     */
    public String jdbcUrl() {
        return "jdbc:postgresql://" + Urls.authority(host, port) + "/" + Urls.encode(database);
    }

    /**
     * The R2DBC URL {@code r2dbc:postgresql://user@host:port/database}, with credentials so that
     * {@code ConnectionFactories.get(url)} is enough: the password follows the user as
     * {@code user:password@} when it is not empty. Parts are percent-encoded.
     */
    public String r2dbcUrl() {
        return Urls.r2dbcUrl("postgresql", host, port, database, username, password);
    }

    /** Where this server came from. */
    public ServiceSource source() {
        return source;
    }

    @Override
    public boolean equals(@Nullable Object other) {
        return other instanceof PostgresServer that
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
        return "postgresql://" + username + "@" + Urls.authority(host, port) + "/" + database + " (" + source + ")";
    }
}
