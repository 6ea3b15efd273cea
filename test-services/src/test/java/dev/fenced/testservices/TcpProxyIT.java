package dev.fenced.testservices;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import java.io.IOException;
import java.net.ConnectException;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.util.concurrent.Callable;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

@ExtendWith(RedisServerExtension.class)
final class TcpProxyIT {

    // Long enough for a loopback round trip on a loaded machine; only bounds how long "no reply" is watched.
    private static final int NO_REPLY_WAIT_MILLIS = 500;

    private TcpProxy proxy;

    @BeforeEach
    void startProxy(RedisServer redis) {
        proxy = TcpProxy.start(redis.host(), redis.port());
    }

    @AfterEach
    void closeProxy() {
        proxy.close();
    }

    @Test
    void relaysToTheTarget() throws Exception {
        assertThat(proxy.host()).isEqualTo("127.0.0.1");
        try (RespConnection connection = connect()) {
            assertThat(connection.command("PING")).isEqualTo("+PONG");
        }
    }

    @Test
    void blackholedConnectionGetsNoReply() throws Exception {
        try (RespConnection connection = connect()) {
            assertThat(connection.command("PING")).isEqualTo("+PONG");

            proxy.blackhole();
            connection.readTimeoutMillis(NO_REPLY_WAIT_MILLIS);

            assertThatThrownBy(() -> connection.command("PING")).isInstanceOf(SocketTimeoutException.class);
        }
    }

    @Test
    void newConnectionWhileBlackholedIsAcceptedButGetsNoReply() throws Exception {
        proxy.blackhole();
        try (RespConnection connection = connect()) {
            connection.readTimeoutMillis(NO_REPLY_WAIT_MILLIS);

            assertThatThrownBy(() -> connection.command("PING")).isInstanceOf(SocketTimeoutException.class);
        }
    }

    @Test
    void heldRequestIsAnsweredAfterResume() throws Exception {
        try (RespConnection connection = connect()) {
            proxy.blackhole();
            connection.readTimeoutMillis(NO_REPLY_WAIT_MILLIS);
            assertThatThrownBy(() -> connection.command("PING")).isInstanceOf(SocketTimeoutException.class);

            proxy.resume();
            connection.readTimeoutMillis(10_000);

            assertThat(connection.readReply()).isEqualTo("+PONG");
            assertThat(connection.command("ECHO", "after")).isEqualTo("after");
        }
    }

    @Test
    void newConnectionWorksAfterResume() throws Exception {
        proxy.blackhole();
        proxy.resume();
        try (RespConnection connection = connect()) {
            assertThat(connection.command("PING")).isEqualTo("+PONG");
        }
    }

    @Test
    void resetAllBreaksCurrentConnectionsButNotLaterOnes() throws Exception {
        try (RespConnection connection = connect()) {
            assertThat(connection.command("PING")).isEqualTo("+PONG");

            proxy.resetAll();

            assertBroken(connection);
        }
        try (RespConnection connection = connect()) {
            assertThat(connection.command("PING")).isEqualTo("+PONG");
        }
    }

    @Test
    void resetAllAlsoBreaksBlackholedConnections() throws Exception {
        try (RespConnection connection = connect()) {
            assertThat(connection.command("PING")).isEqualTo("+PONG");
            proxy.blackhole();

            proxy.resetAll();

            assertBroken(connection);
        }
    }

    @Test
    void refusedNewConnectionIsResetWhileCurrentOnesKeepWorking() throws Exception {
        try (RespConnection current = connect()) {
            assertThat(current.command("PING")).isEqualTo("+PONG");

            proxy.refuseNew(true);
            assertConnectionFailsOrBreaks(this::connect);
            assertThat(current.command("PING")).isEqualTo("+PONG");

            proxy.refuseNew(false);
            try (RespConnection accepted = connect()) {
                assertThat(accepted.command("PING")).isEqualTo("+PONG");
            }
        }
    }

    @Test
    void unreachableTargetResetsTheClient() throws Exception {
        // A port held by a socket that is bound but never listens: connections to it are refused for as long as the
        // test runs (a port found free and let go could be taken by a listener meanwhile; a full build once saw the
        // proxy's client left open, its read timing out).
        try (java.net.Socket reserved = new java.net.Socket()) {
            reserved.bind(new java.net.InetSocketAddress("127.0.0.1", 0));
            try (TcpProxy toNowhere = TcpProxy.start("127.0.0.1", reserved.getLocalPort())) {
                assertConnectionFailsOrBreaks(() -> RespConnection.open(toNowhere.host(), toNowhere.port()));
            }
        }
    }

    @Test
    void closeStopsListeningAndBreaksConnections() throws Exception {
        try (RespConnection connection = connect()) {
            assertThat(connection.command("PING")).isEqualTo("+PONG");

            proxy.close();

            assertBroken(connection);
            assertThatThrownBy(this::connect).isInstanceOf(ConnectException.class);
        }
    }

    @Test
    void retargetSendsNewConnectionsElsewhereAndLeavesCurrentOnesAlone(RedisServer redis) throws Exception {
        String key = "proxy:retarget:" + java.util.UUID.randomUUID();
        try (RedisProcess second = RedisProcess.start(); RespConnection before = connect()) {
            second.call("SET", key, "second");
            assertThat(before.command("PING")).as("relayed, so connected to the first target").isEqualTo("+PONG");

            proxy.retarget(second.host(), second.port());

            try (RespConnection after = connect()) {
                assertThat(after.command("GET", key)).isEqualTo("second");
            }
            assertThat(before.command("EXISTS", key)).as("still on the first target").isEqualTo(":0");
        }
        assertThatThrownBy(() -> proxy.retarget("127.0.0.1", 70_000)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void anArmedRequestRunsButItsReplyIsReplacedByAReset(RedisServer redis) throws Exception {
        String key = "proxy:marker:" + java.util.UUID.randomUUID();
        proxy.resetAfterRequestContaining("armed-marker", 1);
        try (RespConnection connection = connect()) {
            assertThat(connection.command("PING")).as("requests without the marker pass").isEqualTo("+PONG");
            connection.send("SET", key, "armed-marker");

            Throwable failure = catchThrowable(() -> assertThat(connection.readByte()).isEqualTo(-1));
            if (failure != null) {
                assertThat(failure).isInstanceOf(SocketException.class);
            }
        }
        assertThat(proxy.resetsFired()).isEqualTo(1);
        try (RespConnection direct = RespConnection.open(redis.host(), redis.port()); RespConnection next = connect()) {
            assertThat(direct.command("GET", key)).as("the command ran").isEqualTo("armed-marker");
            assertThat(next.command("SET", key, "armed-marker")).as("armed once only").isEqualTo("+OK");
        }
    }

    @Test
    void delayedRepliesArriveWhole() throws Exception {
        proxy.delayReplies(20);
        try (RespConnection connection = connect()) {
            assertThat(connection.command("PING")).isEqualTo("+PONG");
            assertThat(connection.command("ECHO", "late")).isEqualTo("late");
        }
        assertThatThrownBy(() -> proxy.delayReplies(-1)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void rejectsAnOutOfRangeTargetPort() {
        assertThatThrownBy(() -> TcpProxy.start("127.0.0.1", 0))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("targetPort must be between 1 and 65535, but is 0");
    }

    private RespConnection connect() throws IOException {
        return RespConnection.open(proxy.host(), proxy.port());
    }

    /**
     * Connecting fails with a socket error, or the connection then breaks as {@link #assertBroken} says. The
     * proxy resets a connection right after accepting it, and the reset may reach the client while its
     * connect call is still checking the outcome.
     */
    private static void assertConnectionFailsOrBreaks(Callable<RespConnection> connect) throws Exception {
        RespConnection connection;
        try {
            connection = connect.call();
        } catch (SocketException expected) {
            return;
        }
        try (connection) {
            assertBroken(connection);
        }
    }

    /** The next read ends the stream or fails with a socket error; a timeout would mean the connection lives. */
    private static void assertBroken(RespConnection connection) throws IOException {
        Throwable failure = catchThrowable(() -> {
            connection.send("PING");
            assertThat(connection.readByte()).isEqualTo(-1);
        });
        if (failure != null) {
            assertThat(failure).isInstanceOf(SocketException.class);
        }
    }
}
