package dev.fenced.testservices;

import java.net.URI;
import java.net.URLDecoder;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;

/** Small helpers for the URLs the server classes read and write. Stateless, so thread-safe. */
final class Urls {

    private Urls() {
    }

    /** {@code host:port}, with an IPv6 host in brackets as URLs require. */
    static String authority(String host, int port) {
        return (host.indexOf(':') >= 0 ? "[" + host + "]" : host) + ":" + port;
    }

    /** The host of {@code uri} without the brackets {@link URI#getHost()} keeps around IPv6 literals. */
    static String host(URI uri) {
        String host = uri.getHost();
        if (host.startsWith("[") && host.endsWith("]")) {
            return host.substring(1, host.length() - 1);
        }
        return host;
    }

    /** The port of {@code uri}, or {@code defaultPort} when it names none; {@code -1} when out of range. */
    static int port(URI uri, int defaultPort) {
        int port = uri.getPort();
        if (port == -1) {
            return defaultPort;
        }
        return port >= 1 && port <= 65_535 ? port : -1;
    }

    /** Percent-decodes one part of a URL; unlike form decoding, {@code +} stays a plus sign. */
    static String decode(String part) {
        return URLDecoder.decode(part.replace("+", "%2B"), StandardCharsets.UTF_8);
    }

    /** Percent-encodes one part of a URL; unlike form encoding, a space becomes {@code %20}. */
    static String encode(String part) {
        return URLEncoder.encode(part, StandardCharsets.UTF_8).replace("+", "%20");
    }

    /**
     * The parts of a database URL {@code scheme://user[:password]@host[:port]/database} (parts percent-encoded),
     * as tests take it from the environment.
     */
    record DatabaseUrl(String host, int port, String database, String username, String password) {

        /**
         * Parses {@code value}, the content of the environment variable {@code variable}.
         *
         * @param defaultPort the port when the URL names none
         * @param schemes the accepted schemes, the first one named in the error message
         * @throws IllegalArgumentException if {@code value} is not of that form; the message names the variable
         *     but never repeats the value, which may hold a password
         */
        static DatabaseUrl parse(String variable, String value, int defaultPort, String... schemes) {
            URI url;
            try {
                url = new URI(value.strip());
            } catch (java.net.URISyntaxException e) {
                throw invalid(variable, schemes[0]);
            }
            String scheme = url.getScheme();
            String userInfo = url.getRawUserInfo();
            String path = url.getRawPath();
            boolean known = false;
            for (String accepted : schemes) {
                known |= accepted.equalsIgnoreCase(scheme);
            }
            if (!known || url.getHost() == null
                    || userInfo == null || userInfo.isEmpty() || userInfo.startsWith(":")
                    || path == null || path.length() < 2 || path.indexOf('/', 1) >= 0
                    || url.getRawQuery() != null || url.getRawFragment() != null) {
                throw invalid(variable, schemes[0]);
            }
            int port = Urls.port(url, defaultPort);
            if (port == -1) {
                throw invalid(variable, schemes[0]);
            }
            int colon = userInfo.indexOf(':');
            String username = decode(colon < 0 ? userInfo : userInfo.substring(0, colon));
            String password = colon < 0 ? "" : decode(userInfo.substring(colon + 1));
            return new DatabaseUrl(Urls.host(url), port, decode(path.substring(1)), username, password);
        }

        private static IllegalArgumentException invalid(String variable, String scheme) {
            return new IllegalArgumentException(
                    variable + " must be " + scheme + "://user[:password]@host[:port]/database (no options)");
        }
    }

    /**
     * The R2DBC URL {@code r2dbc:driver://user[:password]@host:port/database}, with credentials so that
     * {@code ConnectionFactories.get(url)} is enough; the password only when it is not empty.
     */
    static String r2dbcUrl(String driver, String host, int port, String database, String username, String password) {
        String credentials = encode(username) + (password.isEmpty() ? "" : ":" + encode(password));
        return "r2dbc:" + driver + "://" + credentials + "@" + authority(host, port) + "/" + encode(database);
    }
}
