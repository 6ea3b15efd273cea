package dev.fenced.testservices;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

final class RedisServerTest {

    private static final String VARIABLE = "FENCED_REDIS_URI";

    @Test
    void readsHostAndPort() {
        RedisServer server = RedisServer.fromEnvironment(VARIABLE, "redis://127.0.0.1:6380");

        assertThat(server.host()).isEqualTo("127.0.0.1");
        assertThat(server.port()).isEqualTo(6380);
        assertThat(server.uri()).isEqualTo("redis://127.0.0.1:6380");
        assertThat(server.source()).isEqualTo(ServiceSource.ENVIRONMENT);
    }

    @Test
    void defaultsToPort6379AndToleratesATrailingSlashAndBlanks() {
        RedisServer server = RedisServer.fromEnvironment(VARIABLE, " redis://redis.test/ ");

        assertThat(server.host()).isEqualTo("redis.test");
        assertThat(server.port()).isEqualTo(6379);
    }

    @Test
    void keepsIpv6HostsWithoutBracketsAndWritesThemWithBrackets() {
        RedisServer server = RedisServer.fromEnvironment(VARIABLE, "redis://[::1]:6379");

        assertThat(server.host()).isEqualTo("::1");
        assertThat(server.uri()).isEqualTo("redis://[::1]:6379");
    }

    @ParameterizedTest
    @ValueSource(strings = {
        "127.0.0.1:6379", "http://127.0.0.1:6379", "rediss://127.0.0.1:6379", "redis://:secret@127.0.0.1:6379",
        "redis://127.0.0.1:6379/1", "redis://127.0.0.1:6379?timeout=1s", "redis://127.0.0.1:0",
        "redis://127.0.0.1:70000", "redis://bad host", "redis://"
    })
    void rejectsAnythingButRedisHostAndPort(String value) {
        assertThatThrownBy(() -> RedisServer.fromEnvironment(VARIABLE, value))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("FENCED_REDIS_URI must be redis://host[:port] (no password, database or options), but is '"
                        + value + "'");
    }

    @Test
    void equalServersHaveEqualHashCodes() {
        RedisServer server = new RedisServer("127.0.0.1", 6379, ServiceSource.EMBEDDED);

        assertThat(server).isEqualTo(new RedisServer("127.0.0.1", 6379, ServiceSource.EMBEDDED))
                .hasSameHashCodeAs(new RedisServer("127.0.0.1", 6379, ServiceSource.EMBEDDED))
                .isNotEqualTo(new RedisServer("127.0.0.1", 6379, ServiceSource.ENVIRONMENT))
                .hasToString("redis://127.0.0.1:6379 (EMBEDDED)");
    }
}
