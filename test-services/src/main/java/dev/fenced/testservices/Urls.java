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
}
