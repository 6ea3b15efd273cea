package dev.fenced.testservices;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.net.ConnectException;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

final class EmbeddedRedisIT {

    @Test
    void startsOnAFreeLoopbackPortOtherThanTheDefault() throws Exception {
        try (EmbeddedRedis redis = EmbeddedRedis.start();
                RespConnection connection = RespConnection.open(redis.host(), redis.port())) {
            assertThat(redis.host()).isEqualTo("127.0.0.1");
            assertThat(redis.port()).isNotEqualTo(6379);
            assertThat(redis.uri()).isEqualTo("redis://127.0.0.1:" + redis.port());
            assertThat(redis.isRunning()).isTrue();
            assertThat(connection.command("PING")).isEqualTo("+PONG");
        }
    }

    @ParameterizedTest
    @EnumSource(EmbeddedRedis.Binary.class)
    void eachBinaryStartsAServerThatForgetsItsDataOnRestart(EmbeddedRedis.Binary binary) throws Exception {
        try (EmbeddedRedis redis = EmbeddedRedis.start(binary)) {
            try (RespConnection connection = RespConnection.open(redis.host(), redis.port())) {
                // A two-element array: the name, then the value.
                assertThat(connection.command("CONFIG", "GET", "bind")).isEqualTo("*2");
                assertThat(connection.readReply()).isEqualTo("bind");
                assertThat(connection.readReply()).isEqualTo("127.0.0.1");
                assertThat(connection.command("SET", "fenced:key", "value")).isEqualTo("+OK");
            }

            redis.restart();

            try (RespConnection connection = RespConnection.open(redis.host(), redis.port())) {
                assertThat(connection.command("GET", "fenced:key")).isNull();
            }
        }
    }

    @Test
    void twoInstancesUseDifferentPorts() {
        try (EmbeddedRedis first = EmbeddedRedis.start(); EmbeddedRedis second = EmbeddedRedis.start()) {
            assertThat(first.port()).isNotEqualTo(second.port());
        }
    }

    @Test
    void restartKeepsThePortAndLosesTheData() throws Exception {
        try (EmbeddedRedis redis = EmbeddedRedis.start()) {
            int port = redis.port();
            try (RespConnection connection = RespConnection.open(redis.host(), port)) {
                assertThat(connection.command("SET", "fenced:key", "value")).isEqualTo("+OK");
                assertThat(connection.command("GET", "fenced:key")).isEqualTo("value");
            }

            redis.restart();

            assertThat(redis.port()).isEqualTo(port);
            try (RespConnection connection = RespConnection.open(redis.host(), port)) {
                assertThat(connection.command("GET", "fenced:key")).isNull();
            }
        }
    }

    @Test
    void restartLosesEvenExplicitlySavedData() throws Exception {
        try (EmbeddedRedis redis = EmbeddedRedis.start()) {
            try (RespConnection connection = RespConnection.open(redis.host(), redis.port())) {
                assertThat(connection.command("SET", "fenced:saved", "value")).isEqualTo("+OK");
                assertThat(connection.command("SAVE")).isEqualTo("+OK");
            }

            redis.restart();

            try (RespConnection connection = RespConnection.open(redis.host(), redis.port())) {
                assertThat(connection.command("GET", "fenced:saved")).isNull();
            }
        }
    }

    @Test
    void stopClosesConnectionsAndRefusesNewOnes() throws Exception {
        try (EmbeddedRedis redis = EmbeddedRedis.start();
                RespConnection connection = RespConnection.open(redis.host(), redis.port())) {
            assertThat(connection.command("PING")).isEqualTo("+PONG");

            redis.stop();

            assertThat(redis.isRunning()).isFalse();
            assertThat(connection.readByte()).isEqualTo(-1);
            assertThatThrownBy(() -> RespConnection.open(redis.host(), redis.port()))
                    .isInstanceOf(ConnectException.class);
        }
    }

    @Test
    void restartAfterStopStartsAgain() throws Exception {
        try (EmbeddedRedis redis = EmbeddedRedis.start()) {
            redis.stop();
            redis.restart();
            try (RespConnection connection = RespConnection.open(redis.host(), redis.port())) {
                assertThat(connection.command("PING")).isEqualTo("+PONG");
            }
        }
    }

    @Test
    void closedInstanceCannotRestart() {
        EmbeddedRedis redis = EmbeddedRedis.start();
        redis.close();
        redis.close();

        assertThat(redis.isRunning()).isFalse();
        assertThatThrownBy(redis::restart)
                .isInstanceOf(IllegalStateException.class)
                .hasMessage("The embedded Redis at " + redis.uri() + " is closed and cannot restart");
    }
}
