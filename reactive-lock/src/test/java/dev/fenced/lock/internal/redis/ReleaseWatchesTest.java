package dev.fenced.lock.internal.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.internal.KeyLayout;
import io.lettuce.core.cluster.api.reactive.RedisClusterReactiveCommands;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * SUBSCRIBE and UNSUBSCRIBE reach the server in the order the watches changed, also while the pub/sub
 * connection is still opening: commands waiting for one connection to open would otherwise run in any order
 * (a future's dependents run last-registered first), and an UNSUBSCRIBE that overtakes a later SUBSCRIBE of the
 * same channel leaves its waiter deaf.
 */
class ReleaseWatchesTest {

    /** Connections whose pub/sub connection opens when the test says so, recording the commands it runs. */
    private static final class OpeningConnections implements RedisConnections {

        final CompletableFuture<Void> opened = new CompletableFuture<>();
        final List<String> sent = new CopyOnWriteArrayList<>();

        private Mono<Void> onceOpen(String command) {
            return Mono.fromFuture(opened, true).then(Mono.fromRunnable(() -> sent.add(command)));
        }

        @Override
        public Mono<Void> subscribe(String channel) {
            return onceOpen("SUBSCRIBE " + channel);
        }

        @Override
        public Mono<Void> unsubscribe(String channel) {
            return onceOpen("UNSUBSCRIBE " + channel);
        }

        @Override
        public Mono<RedisClusterReactiveCommands<String, String>> commands() {
            return Mono.never();
        }

        @Override
        public @Nullable RedisClusterReactiveCommands<String, String> openCommands() {
            return null;
        }

        @Override
        public boolean ownsClient() {
            return true;
        }

        @Override
        public Mono<RedisClusterReactiveCommands<String, String>> acknowledgedCommandsAt(String key) {
            return Mono.never();
        }

        @Override
        public boolean cluster() {
            return false;
        }

        @Override
        public String nodeOf(String key) {
            return "";
        }

        @Override
        public ServerInfo server() {
            return ServerInfo.UNKNOWN;
        }

        @Override
        public ServerInfo serverOf(RedisClusterReactiveCommands<String, String> r) {
            return ServerInfo.UNKNOWN;
        }

        @Override
        public void discardAcknowledged(RedisClusterReactiveCommands<String, String> r) {
        }

        @Override
        public Mono<Void> verified() {
            return Mono.empty();
        }

        @Override
        public boolean shardedPubSub() {
            return false;
        }

        @Override
        public Mono<Void> close() {
            return Mono.empty();
        }
    }

    @Test
    void aWatchThatComesBackWhileTheConnectionOpensEndsSubscribed() {
        OpeningConnections connections = new OpeningConnections();
        RedisCommands commands = new RedisCommands(connections, Duration.ofSeconds(5), Schedulers.parallel());
        ReleaseWatches watches = new ReleaseWatches(connections, commands, new KeyLayout("t:"), Schedulers.parallel());

        Disposable first = watches.releases("a").subscribe(); // SUBSCRIBE, waiting for the connection
        first.dispose();                                      // UNSUBSCRIBE
        Disposable second = watches.releases("a").subscribe(); // SUBSCRIBE again: a new waiter of the same lock
        connections.opened.complete(null);

        String channel = "t:{a}:released";
        assertThat(connections.sent).containsExactly("SUBSCRIBE " + channel, "UNSUBSCRIBE " + channel, "SUBSCRIBE " + channel);
        second.dispose();
        watches.close();
    }

    @Test
    void aWatchThatEndsWhileTheConnectionOpensLeavesNoSubscriptionBehind() {
        OpeningConnections connections = new OpeningConnections();
        RedisCommands commands = new RedisCommands(connections, Duration.ofSeconds(5), Schedulers.parallel());
        ReleaseWatches watches = new ReleaseWatches(connections, commands, new KeyLayout("t:"), Schedulers.parallel());

        watches.releases("b").subscribe().dispose(); // a waiter that came and went before the connection opened
        connections.opened.complete(null);

        String channel = "t:{b}:released";
        // Out of order, the SUBSCRIBE would come last and leave the channel subscribed with nobody watching.
        assertThat(connections.sent).containsExactly("SUBSCRIBE " + channel, "UNSUBSCRIBE " + channel);
        watches.close();
    }
}
