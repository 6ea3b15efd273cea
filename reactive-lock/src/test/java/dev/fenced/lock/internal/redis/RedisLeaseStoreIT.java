package dev.fenced.lock.internal.redis;

import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.lock.internal.KeyLayout;
import dev.fenced.lock.internal.LeaseStore;
import dev.fenced.lock.internal.LeaseStoreContract;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;

import dev.fenced.lock.LockServiceException;
import dev.fenced.lock.TokenScheme;
import dev.fenced.lock.internal.LeaseStore.AcquireReply;
import dev.fenced.testservices.RedisCluster;
import dev.fenced.testservices.RedisProcess;
import dev.fenced.testservices.RedisServer;
import dev.fenced.testservices.RedisServerExtension;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.sync.RedisCommands;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** The store contract on Redis with the default server-time tokens, and what those tokens add. */
@ExtendWith(RedisServerExtension.class)
class RedisLeaseStoreIT extends LeaseStoreContract {

    private RedisLeaseStore store;
    private ClientSettings settings;
    private String redisUri;
    private RedisClient adminClient;
    private RedisCommands<String, String> admin;

    /** A server of this class's own, for the tests that count script calls or pause the server. */
    private static RedisProcess own;

    /** The server under test: the tests' Redis. */
    String uriOf(RedisServer redis) {
        return redis.uri();
    }

    /** The scheme the store under test mints tokens with. */
    TokenScheme scheme() {
        return TokenScheme.SERVER_TIME;
    }

    @BeforeEach
    void connect(RedisServer redis) {
        redisUri = uriOf(redis);
        settings = ClientSettings.of("it-" + UUID.randomUUID() + ":", Duration.ofSeconds(30), null, Duration.ofSeconds(30), null, null)
                .withTokenScheme(scheme());
        store = RedisLeaseStore.open(new RedisTarget.Server(RedisURI.create(redisUri)), settings, ReplicaAcks.NONE);
        adminClient = RedisClient.create(redisUri);
        admin = adminClient.connect().sync();
    }

    @AfterEach
    void close() {
        store.close().block(Duration.ofSeconds(10));
        settings.scheduler().dispose();
        adminClient.shutdown();
    }

    @Override
    protected LeaseStore store() {
        return store;
    }

    @Override
    protected boolean consecutiveTokens() {
        return scheme() == TokenScheme.COUNTER;
    }

    @Override
    protected void elapse(Duration duration) {
        sleep(duration);
    }

    /**
     * The acquire script declares every key it may write (lock, counter, holder key): while a reshard has moved the
     * lock and its counter but not yet the holder key, the importing node refuses a hand-off (TRYAGAIN) instead of
     * writing a second holder key, and the reshard's next MIGRATE completes.
     */
    @Test
    void aGrantDuringASlotMigrationNeverWritesAKeyTheReshardHasNotMovedYet() throws IOException {
        try (RedisCluster cluster = RedisCluster.start(2)) {
            String lock = "it-" + UUID.randomUUID() + ":{m}";
            String fence = lock + ":fence";
            String holder = lock + ":holder";
            int slot = cluster.slotOf(lock);
            int source = cluster.ownerOf(slot);
            int target = 1 - source;
            RedisProcess from = cluster.nodes().get(source);
            RedisProcess to = cluster.nodes().get(target);
            String script = LuaScript.ACQUIRE.source();
            from.call("EVAL", script, "3", lock, fence, holder, "", "", "", "o1", "60000", "0", "L1");
            assertThat(from.call("GET", holder)).isEqualTo("1 L1");

            to.call("CLUSTER", "SETSLOT", Integer.toString(slot), "IMPORTING", cluster.nodeId(source));
            from.call("CLUSTER", "SETSLOT", Integer.toString(slot), "MIGRATING", cluster.nodeId(target));
            from.call("MIGRATE", "127.0.0.1", Integer.toString(to.port()), "", "0", "5000", "KEYS", lock, fence);

            Object refused = askingEval(to.port(), script, lock, fence, holder, "", "o1", "1", "o2", "30000", "0", "L2");
            assertThat(String.valueOf(refused)).startsWith("ERROR TRYAGAIN");

            assertThatCode(() -> from.call("MIGRATE", "127.0.0.1", Integer.toString(to.port()), "", "0", "5000", "KEYS",
                    holder)).as("the reshard's next MIGRATE").doesNotThrowAnyException();
            Object granted = askingEval(to.port(), script, lock, fence, holder, "", "o1", "1", "o2", "30000", "0", "L2");
            assertThat(String.valueOf(granted)).startsWith("[1, 2");
        }
    }

    private AcquireReply grantAndRelease(String name, String owner) {
        AcquireReply reply = store.acquire(name, owner, 10_000, 0).block(Duration.ofSeconds(5));
        assertThat(reply).isNotNull();
        assertThat(reply.acquired()).isTrue();
        assertThat(store.release(name, owner, reply.token()).block(Duration.ofSeconds(5))).isTrue();
        return reply;
    }

    private long serverMicros() {
        List<String> time = admin.time();
        return Long.parseLong(time.get(0)) * 1_000_000L + Long.parseLong(time.get(1));
    }

    @Test
    void aTokenIsAtLeastTheServerTimeInMicroseconds() {
        if (consecutiveTokens()) {
            assertThat(grantAndRelease("time-" + UUID.randomUUID(), "a").token()).isEqualTo(1);
            return;
        }
        long before = serverMicros();
        long token = grantAndRelease("time-" + UUID.randomUUID(), "a").token();
        assertThat(token).isBetween(before, serverMicros());
    }

    @Test
    void tokensStayAboveEveryEarlierOneAfterTheCounterFallsBackBySeveralGrants() {
        String name = "fallback-" + UUID.randomUUID();
        String counter = settings.keyPrefix() + "{" + name + "}:fence";
        long highest = 0;
        for (int i = 0; i < 5; i++) {
            highest = grantAndRelease(name, "before-" + i).token();
        }
        // A failover to a replica that missed the last three increments: the counter falls back.
        admin.set(counter, Long.toString(highest - 3));
        AcquireReply next = grantAndRelease(name, "after-0");
        if (consecutiveTokens()) {
            assertThat(next.token()).as("the window of counter tokens").isEqualTo(highest - 2);
        } else {
            assertThat(next.token()).isGreaterThan(highest);
        }
        // A restart without persistence: the counter is gone.
        admin.del(counter);
        AcquireReply afterRestart = grantAndRelease(name, "after-1");
        if (consecutiveTokens()) {
            assertThat(afterRestart.token()).isEqualTo(1);
        } else {
            assertThat(afterRestart.token()).isGreaterThan(next.token());
        }
    }

    @Test
    void theCounterKeepsTheLastTokenExactly() {
        String name = "exact-" + UUID.randomUUID();
        long token = grantAndRelease(name, "a").token();
        assertThat(admin.get(settings.keyPrefix() + "{" + name + "}:fence")).isEqualTo(Long.toString(token));
    }

    /** Acquires and releases in flight at once go out together: one script call carries many locks. */
    @Test
    void acquiresAndReleasesInFlightTogetherShareScriptCalls() {
        withStore(Duration.ofSeconds(10), (shared, server) -> {
            int locks = 400;
            long before = scriptCalls(server);
            acquireAndReleaseAtOnce(shared, "shared-", locks);
            long calls = scriptCalls(server) - before;
            assertThat(calls).as("script calls for %d acquires and %d releases", locks, locks).isLessThan(locks / 2);
        });
    }

    /** A call that carried many acquires fails each of them with its own lock's name. */
    @Test
    void aFailedCallFailsEachAcquireItCarriedWithItsOwnLock() {
        withStore(Duration.ofMillis(1_000), (timing, server) -> {
            long callsBefore = scriptCalls(server);
            server.clientPause(5_000);
            // Eight calls fill what may be in flight; the next requests wait for them, then leave together.
            Flux<Throwable> first = failures(timing, 0, ScriptBatcher.MAX_IN_FLIGHT);
            Flux<Throwable> rest = Mono.delay(Duration.ofMillis(400)).thenMany(failures(timing, ScriptBatcher.MAX_IN_FLIGHT, 42));
            List<Throwable> failures = Flux.merge(first, rest).collectList().block(Duration.ofSeconds(30));
            assertThat(failures).hasSize(50).allSatisfy(e -> assertThat(e).isInstanceOf(LockServiceException.class)
                    .hasMessageContaining("no reply within the command timeout of 1000 ms"));
            assertThat(failures.stream().map(e -> ((LockServiceException) e).lockName()).distinct().count())
                    .as("each failure names its own lock").isEqualTo(50);
            scriptCalls(server); // answered once the pause ends, after the paused calls (or with them)
            sleep(Duration.ofMillis(300));
            assertThat(scriptCalls(server) - callsBefore).as("script calls that carried the 50 acquires").isLessThan(25);
        });
    }

    /** A request that waited longer than the command timeout for a call fails without being sent. */
    @Test
    void aRequestThatWaitedLongerThanTheCommandTimeoutFailsUnsent() {
        withStore(Duration.ofMillis(300), (timing, server) -> {
            server.clientPause(1_500);
            List<Throwable> failures = failures(timing, 0, 50).collectList().block(Duration.ofSeconds(30));
            assertThat(failures).hasSize(50).allSatisfy(e -> assertThat(e).isInstanceOf(LockServiceException.class));
            List<Throwable> unsent = failures.stream().filter(timing::neverSent).toList();
            assertThat(unsent).as("requests that waited behind the calls in flight").hasSizeGreaterThanOrEqualTo(50 - ScriptBatcher.MAX_IN_FLIGHT)
                    .allSatisfy(e -> assertThat(e).hasMessageContaining("waited longer than the command timeout of 300 ms"));
            assertThat(failures.stream().filter(e -> !timing.neverSent(e)))
                    .allSatisfy(e -> assertThat(e).hasMessageContaining("no reply within the command timeout of 300 ms"));
        });
    }

    /**
     * The server for the tests that count script calls or pause the server: one nobody else uses, so that other
     * builds sharing the tests' Redis neither add to the counts nor stall behind the pause. Redis 7 here; the
     * Redis 6.2 subclass answers its own server.
     */
    String privateUri() {
        synchronized (RedisLeaseStoreIT.class) {
            if (own == null) {
                own = RedisProcess.start();
            }
            return own.uri();
        }
    }

    @AfterAll
    static void stopOwnServer() {
        synchronized (RedisLeaseStoreIT.class) {
            if (own != null) {
                own.close();
                own = null;
            }
        }
    }

    /**
     * Runs {@code body} on a store of its own, on {@link #privateUri()}, with the given command timeout, closed
     * afterwards; {@code admin} in the body is a connection to the same server.
     */
    private void withStore(Duration commandTimeout, java.util.function.BiConsumer<RedisLeaseStore, RedisCommands<String, String>> body) {
        String uri = privateUri();
        ClientSettings quick = ClientSettings.of("it-" + UUID.randomUUID() + ":", Duration.ofSeconds(30), null,
                Duration.ofSeconds(30), commandTimeout, null).withTokenScheme(scheme());
        RedisLeaseStore timing = RedisLeaseStore.open(new RedisTarget.Server(RedisURI.create(uri)), quick, ReplicaAcks.NONE);
        RedisClient ownAdminClient = RedisClient.create(uri);
        try {
            timing.ping().block(Duration.ofSeconds(5));
            body.accept(timing, ownAdminClient.connect().sync());
        } finally {
            timing.close().block(Duration.ofSeconds(10));
            quick.scheduler().dispose();
            ownAdminClient.shutdown();
        }
    }

    private static Flux<Throwable> failures(RedisLeaseStore store, int from, int count) {
        return Flux.range(from, count)
                .flatMap(i -> store.acquire("paused-" + i, "owner-" + i, 10_000, 0)
                        .then(Mono.<Throwable>empty())
                        .onErrorResume(e -> Mono.just(e)), count);
    }

    /** A token counter that holds something other than a number counts as 0 (the next token is still minted). */
    @Test
    void aCounterThatIsNotANumberCountsAsZero() {
        String lock = "garbled-" + UUID.randomUUID();
        admin.set(new KeyLayout(settings.keyPrefix()).fenceKey(lock), "not-a-number");
        AcquireReply reply = store.acquire(lock, "a", 10_000, 0).block(Duration.ofSeconds(5));
        assertThat(reply).isNotNull();
        assertThat(reply.acquired()).isTrue();
        assertThat(reply.token()).isPositive();
    }

    /** A key of another type fails the acquire and the release of its own lock, not those it shared a call with. */
    @Test
    void aKeyOfAnotherTypeFailsOnlyItsOwnLock() {
        KeyLayout layout = new KeyLayout(settings.keyPrefix());
        String run = UUID.randomUUID().toString();
        int locks = 60;
        int bad = 40;
        admin.lpush(layout.lockKey("typed-" + bad + run), "a list, not a lock");
        List<Object> acquired = Flux.range(0, locks)
                .flatMapSequential(i -> store.acquire("typed-" + i + run, "owner-" + i, 10_000, 0)
                        .<Object>map(reply -> reply)
                        .onErrorResume(e -> Mono.just(e)), locks)
                .collectList()
                .block(Duration.ofSeconds(30));
        List<Object> released = Flux.range(0, locks)
                .flatMapSequential(i -> store.release("typed-" + i + run, "owner-" + i,
                                acquired.get(i) instanceof AcquireReply reply ? reply.token() : 1L)
                        .<Object>map(deleted -> deleted)
                        .onErrorResume(e -> Mono.just(e)), locks)
                .collectList()
                .block(Duration.ofSeconds(30));
        for (int i = 0; i < locks; i++) {
            if (i == bad) {
                for (Object failure : List.of(acquired.get(i), released.get(i))) {
                    assertThat(failure).isInstanceOf(LockServiceException.class);
                    assertThat(((LockServiceException) failure).lockName()).isEqualTo("typed-" + bad + run);
                    assertThat(((LockServiceException) failure).getMessage()).contains("Redis answered with an error", "WRONGTYPE");
                }
            } else {
                assertThat(acquired.get(i)).as("acquire %d", i).isInstanceOfSatisfying(AcquireReply.class,
                        reply -> assertThat(reply.acquired()).isTrue());
                assertThat(released.get(i)).as("release %d", i).isEqualTo(true);
            }
        }
    }

    /** Acquires {@code locks} locks and releases each once it is held, all at once, and checks every reply. */
    static void acquireAndReleaseAtOnce(RedisLeaseStore store, String prefix, int locks) {
        List<Boolean> released = Flux.range(0, locks)
                .flatMap(i -> store.acquire(prefix + i, "owner-" + i, 10_000, 0)
                        .flatMap(reply -> store.release(prefix + i, "owner-" + i, reply.token())), locks)
                .collectList()
                .block(Duration.ofSeconds(30));
        assertThat(released).hasSize(locks).containsOnly(true);
    }

    private static long scriptCalls(RedisCommands<String, String> server) {
        long calls = 0;
        for (String line : server.info("commandstats").split("\\r?\\n")) {
            if (line.startsWith("cmdstat_evalsha:") || line.startsWith("cmdstat_eval:")) {
                String stats = line.substring(line.indexOf(':') + 1);
                calls += Long.parseLong(stats.substring("calls=".length(), stats.indexOf(',')));
            }
        }
        return calls;
    }

    private static Object askingEval(int port, String... eval) throws IOException {
        try (Socket socket = new Socket("127.0.0.1", port)) {
            OutputStream out = socket.getOutputStream();
            write(out, "ASKING");
            String[] args = new String[eval.length + 2];
            args[0] = "EVAL";
            args[1] = eval[0];
            args[2] = "3";
            System.arraycopy(eval, 1, args, 3, eval.length - 1);
            write(out, args);
            InputStream in = socket.getInputStream();
            read(in); // +OK
            return read(in);
        }
    }

    private static void write(OutputStream out, String... args) throws IOException {
        ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        buffer.write(("*" + args.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
        for (String arg : args) {
            byte[] bytes = arg.getBytes(StandardCharsets.UTF_8);
            buffer.write(("$" + bytes.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
            buffer.write(bytes);
            buffer.write("\r\n".getBytes(StandardCharsets.US_ASCII));
        }
        out.write(buffer.toByteArray());
        out.flush();
    }

    private static Object read(InputStream in) throws IOException {
        String line = line(in);
        char type = line.charAt(0);
        String rest = line.substring(1);
        switch (type) {
            case '+':
                return rest;
            case '-':
                return "ERROR " + rest;
            case ':':
                return Long.parseLong(rest);
            case '$': {
                int n = Integer.parseInt(rest);
                if (n < 0) {
                    return null;
                }
                byte[] bytes = in.readNBytes(n + 2);
                return new String(bytes, 0, n, StandardCharsets.UTF_8);
            }
            case '*': {
                int n = Integer.parseInt(rest);
                Object[] items = new Object[Math.max(0, n)];
                for (int i = 0; i < n; i++) {
                    items[i] = read(in);
                }
                return java.util.Arrays.asList(items);
            }
            default:
                throw new IOException("unexpected reply " + line);
        }
    }

    private static String line(InputStream in) throws IOException {
        StringBuilder b = new StringBuilder();
        int c;
        while ((c = in.read()) != '\r') {
            if (c < 0) {
                throw new IOException("closed");
            }
            b.append((char) c);
        }
        in.read();
        return b.toString();
    }
}
