package dev.fenced.lock.internal.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.testservices.RedisServer;
import dev.fenced.testservices.RedisServerExtension;
import dev.fenced.testservices.TcpProxy;
import io.lettuce.core.RedisClient;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.codec.StringCodec;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CancellationException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.test.StepVerifier;

/**
 * The script path that writes its command to the connection itself ({@link RedisCommands#eval} on a standalone
 * connection): a command that Lettuce cancels on its own (a reset of the connection, a close with commands still
 * buffered) fails the script's Mono, as the reactive API's does, instead of leaving it without any signal.
 */
@ExtendWith(RedisServerExtension.class)
class DirectScriptDispatchIT {

    private static final Duration BOUND = Duration.ofSeconds(15);

    private static final String[] NO_ARGS = {"", "owner", "1", "channel"};

    @Test
    void aScriptInFlightWhenTheConnectionIsResetFails(RedisServer redis) {
        RedisClient client = RedisClient.create("redis://" + redis.host() + ":" + redis.port());
        try (TcpProxy silent = TcpProxy.start(redis.host(), redis.port());
                StatefulRedisConnection<String, String> connection =
                        client.connect(StringCodec.UTF8, io.lettuce.core.RedisURI.create(silent.host(), silent.port()))) {
            silent.blackhole();
            StepVerifier.create(RedisCommands.<List<Object>>eval(connection.reactive(), LuaScript.RELEASE,
                            ScriptOutputType.MULTI, new String[] {"direct-" + UUID.randomUUID()}, NO_ARGS))
                    .then(connection::reset)
                    .expectError(CancellationException.class)
                    .verify(BOUND);
            silent.resume();
        } finally {
            client.shutdown();
        }
    }

    @Test
    void aScriptBufferedWhileDisconnectedFailsWhenTheConnectionCloses(RedisServer redis) throws InterruptedException {
        RedisClient client = RedisClient.create("redis://" + redis.host() + ":" + redis.port());
        try (TcpProxy proxy = TcpProxy.start(redis.host(), redis.port())) {
            StatefulRedisConnection<String, String> connection =
                    client.connect(StringCodec.UTF8, io.lettuce.core.RedisURI.create(proxy.host(), proxy.port()));
            proxy.refuseNew(true);
            proxy.resetAll();
            for (int i = 0; i < 500 && connection.isOpen(); i++) {
                Thread.sleep(10);
            }
            assertThat(connection.isOpen()).as("disconnected").isFalse();
            StepVerifier.create(RedisCommands.<List<Object>>eval(connection.reactive(), LuaScript.RELEASE,
                            ScriptOutputType.MULTI, new String[] {"direct-" + UUID.randomUUID()}, NO_ARGS))
                    .then(connection::closeAsync)
                    .expectError(CancellationException.class)
                    .verify(BOUND);
        } finally {
            client.shutdown();
        }
    }
}
