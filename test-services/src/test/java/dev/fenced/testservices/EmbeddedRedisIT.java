package dev.fenced.testservices;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.File;
import java.io.IOException;
import java.net.ConnectException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
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

    // PATH is not among them: a machine with only a JDK has no redis-server there. Its lookup is tested below.
    @ParameterizedTest
    @EnumSource(names = {"REDIS_7", "REDIS_6"})
    void eachBundledBinaryStartsAServerThatForgetsItsDataOnRestart(EmbeddedRedis.Binary binary) throws Exception {
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
    void theDefaultServerIsTheBundledRedis7WithShardedPubSub() throws Exception {
        try (EmbeddedRedis redis = EmbeddedRedis.start();
                RespConnection connection = RespConnection.open(redis.host(), redis.port())) {
            assertThat(connection.command("INFO", "server")).contains("redis_version:7.");
            // What RedisClusterIT waits through: Redis 6.2 answers "unknown subcommand".
            assertThat(connection.command("PUBSUB", "SHARDNUMSUB", "fenced:channel")).isEqualTo("*2");
            assertThat(connection.readReply()).isEqualTo("fenced:channel");
            assertThat(connection.readReply()).isEqualTo(":0");
        }
    }

    @Test
    void aReplicaIsSyncedWithoutRedis7sFiveSecondDisklessDelay() throws Exception {
        try (EmbeddedRedis redis = EmbeddedRedis.start();
                RespConnection connection = RespConnection.open(redis.host(), redis.port())) {
            assertThat(connection.command("CONFIG", "GET", "repl-diskless-sync-delay")).isEqualTo("*2");
            assertThat(connection.readReply()).isEqualTo("repl-diskless-sync-delay");
            assertThat(connection.readReply()).isEqualTo("0");
        }
    }

    @Test
    void aRedisServerOnThePathIsFoundInTheFirstDirectoryThatHasOne(@TempDir Path temp) throws Exception {
        Path empty = Files.createDirectory(temp.resolve("empty"));
        Path notExecutable = Files.createDirectory(temp.resolve("not-executable"));
        Files.writeString(notExecutable.resolve("redis-server"), "#!/bin/sh\n");
        Path first = Files.createDirectory(temp.resolve("first"));
        Path second = Files.createDirectory(temp.resolve("second"));
        for (Path directory : List.of(first, second)) {
            Files.createSymbolicLink(directory.resolve("redis-server"),
                    EmbeddedRedis.Binary.REDIS_7.executable().toPath());
        }
        String path = String.join(File.pathSeparator, empty.toString(), "", notExecutable.toString(), first.toString(),
                second.toString());

        assertThat(EmbeddedRedis.Binary.onPath(path)).isEqualTo(first.resolve("redis-server").toFile());
    }

    @Test
    void aPathWithoutRedisServerNamesThePath(@TempDir Path temp) {
        String path = temp.toString() + File.pathSeparator + "/nonexistent";

        assertThatThrownBy(() -> EmbeddedRedis.Binary.onPath(path))
                .isInstanceOf(IOException.class)
                .hasMessage("no executable redis-server in any directory of the PATH '" + path + "'");
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
