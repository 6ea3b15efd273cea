package dev.fenced.testservices;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

@ExtendWith(RedisServerExtension.class)
final class RedisServerExtensionIT {

    @Test
    void resolvedServerAnswersPing(RedisServer server) throws Exception {
        try (RespConnection connection = RespConnection.open(server.host(), server.port())) {
            assertThat(connection.command("PING")).isEqualTo("+PONG");
        }
    }

    @Test
    void sourceFollowsTheResolutionOrder(RedisServer server) {
        String configured = System.getenv(RedisServerExtension.ENVIRONMENT_VARIABLE);
        if (configured != null && !configured.isBlank()) {
            assertThat(server).isEqualTo(
                    RedisServer.fromEnvironment(RedisServerExtension.ENVIRONMENT_VARIABLE, configured));
        } else if (DockerEngine.isAvailable()) {
            assertThat(server.source()).isEqualTo(ServiceSource.TESTCONTAINERS);
        } else {
            assertThat(server.source()).isEqualTo(ServiceSource.EMBEDDED);
            assertThat(server.host()).isEqualTo("127.0.0.1");
        }
    }

    @Test
    void uriNamesHostAndPort(RedisServer server) {
        assertThat(server.uri()).isEqualTo("redis://" + server.host() + ":" + server.port());
    }

    @Test
    void everyResolutionReturnsTheSameInstance(RedisServer first, RedisServer second) {
        assertThat(first).isSameAs(second).isSameAs(RedisServerExtension.server());
    }
}
