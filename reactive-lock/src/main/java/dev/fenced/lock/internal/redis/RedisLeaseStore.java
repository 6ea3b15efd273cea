package dev.fenced.lock.internal.redis;

import dev.fenced.lock.TokenScheme;
import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.lock.internal.FleetPages;
import dev.fenced.lock.internal.KeyLayout;
import dev.fenced.lock.internal.LeaseStore;
import dev.fenced.lock.internal.NamePattern;
import io.lettuce.core.KeyScanCursor;
import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.ScanArgs;
import io.lettuce.core.ScanCursor;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.cluster.api.reactive.RedisClusterReactiveCommands;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * The lease store on Redis or Valkey, through Lettuce's reactive API: one server (directly or through
 * Sentinel) or a Redis Cluster. It maps the store's operations onto the Lua scripts beside it and leaves
 * each concern to one piece: running a command ({@link RedisCommands}), routing renewals over a cluster
 * ({@link RenewalRouter}), release-notification subscriptions ({@link ReleaseWatches}), replica
 * acknowledgement ({@link AcknowledgedAcquire}), and the connections with their server checks
 * ({@link RedisConnections}). On one server (directly or through Sentinel), acquires and releases in flight at
 * the same time share script calls ({@link ScriptBatcher}); on a cluster, whose locks live in many slots, and for
 * acquires that replicas must acknowledge, each is a call of its own.
 *
 * <p>Thread-safe.
 */
public final class RedisLeaseStore implements LeaseStore {

    private final RedisConnections connections;
    private final KeyLayout keys;
    private final RedisCommands commands;
    private final RenewalRouter renewals;
    private final ReleaseWatches watches;
    private final ReplicaAcks acks;
    private final boolean serverTimeTokens;
    /** The holder label written with every grant, or {@code null} for none. */
    private final @Nullable String holderLabel;
    private final boolean oneServer;

    /**
     * Whether the server refused a call of {@link #acquireAll} or {@link #releaseAll} whose keys span hash slots (a
     * proxy or a sharded service behind one address): from then on their requests go as single requests do.
     */
    private volatile boolean crossSlotRefused;
    private final Sinks.Many<String> serverChanges = Sinks.many().multicast().directBestEffort();
    // Read here, on the thread that builds the client: reading resources on an event loop would block it.
    private final LuaScript acquireScript = LuaScript.ACQUIRE;
    private final LuaScript releaseScript = LuaScript.RELEASE;
    private final AcknowledgedAcquire acknowledged;
    /**
     * Acquires and releases sent together while others are in flight; {@code null} on a cluster, where keys span
     * slots, and (acquires) with replica acknowledgement, whose acquires have a connection of their own.
     */
    private final @Nullable ScriptBatcher<AcquireRequest, AcquireReply> acquires;
    private final @Nullable ScriptBatcher<ReleaseRequest, Boolean> releases;

    private RedisLeaseStore(ClientSettings settings, ReplicaAcks acks, @Nullable String holderLabel,
            Function<RedisConnections.Listener, RedisConnections> connect) {
        this.keys = new KeyLayout(settings.keyPrefix());
        this.holderLabel = holderLabel;
        this.acks = acks;
        this.serverTimeTokens = settings.tokenScheme() == TokenScheme.SERVER_TIME;
        // The listener is called only once the connections exist, so it may reach the watches.
        ReleaseWatches[] watchesOnceBuilt = new ReleaseWatches[1];
        this.connections = connect.apply(new RedisConnections.Listener() {
            @Override
            public void released(String channel) {
                watchesOnceBuilt[0].onRelease(channel);
            }

            @Override
            public void unsubscribed(String channel) {
                watchesOnceBuilt[0].resubscribe(channel);
            }

            @Override
            public void serverChanged(String change) {
                serverChanges.emitNext(change, Sinks.EmitFailureHandler.busyLooping(Duration.ofMillis(100)));
            }
        });
        // Timeouts fire on the loss scheduler: the errors they raise reach application code, never the renewal thread.
        this.commands = new RedisCommands(connections, settings.commandTimeout(), settings.lossScheduler());
        this.renewals = new RenewalRouter(commands, connections, keys);
        this.watches = new ReleaseWatches(connections, commands, keys, settings.scheduler());
        watchesOnceBuilt[0] = watches;
        this.acknowledged = new AcknowledgedAcquire(commands, connections, acks, acquireScript, this::release);
        // One keyspace: a call may carry locks of many slots (a proxy that refuses it makes the batcher send alone).
        this.oneServer = connections instanceof StandaloneConnections;
        Duration timeout = settings.commandTimeout();
        this.acquires = oneServer && !acks.required()
                ? new ScriptBatcher<>(this::acquireAlone, this::acquireTogether,
                        (e, r) -> commands.classify(e, r.name(), "acquire"), timeout)
                : null;
        this.releases = oneServer
                ? new ScriptBatcher<>(this::releaseAlone, this::releaseTogether,
                        (e, r) -> commands.classify(e, r.name(), "release"), timeout)
                : null;
    }

    /**
     * A store on the given deployment. A Lettuce client the store creates rejects commands while
     * disconnected (never buffers them) and times them out after the command timeout; a shared client keeps
     * its own options, and the store still fails fast while disconnected and times commands out itself.
     *
     * @param target the deployment and who owns its Lettuce client
     * @param settings the client settings
     * @param acks the replica acknowledgement required of an acquire
     * @return the store
     */
    public static RedisLeaseStore open(RedisTarget target, ClientSettings settings, ReplicaAcks acks) {
        return open(target, settings, acks, null);
    }

    /**
     * A store on the given deployment, as {@link #open(RedisTarget, ClientSettings, ReplicaAcks)}, whose grants
     * record a holder label for the fleet view.
     *
     * @param target the deployment and who owns its Lettuce client
     * @param settings the client settings
     * @param acks the replica acknowledgement required of an acquire
     * @param holderLabel the label written with every grant (one {@code SET} in the acquire script), already
     *     validated, or {@code null} to write none
     * @return the store
     */
    public static RedisLeaseStore open(RedisTarget target, ClientSettings settings, ReplicaAcks acks,
            @Nullable String holderLabel) {
        Duration timeout = settings.commandTimeout();
        String prefix = settings.keyPrefix();
        return new RedisLeaseStore(settings, acks, holderLabel, listener -> {
            // One case per kind of target (a switch over the sealed type needs Java 21).
            if (target instanceof RedisTarget.Server server) {
                return StandaloneConnections.owned(server.uri(), timeout, prefix, listener);
            }
            if (target instanceof RedisTarget.SharedServer shared) {
                return StandaloneConnections.shared(shared.client(), shared.uri(), prefix, listener);
            }
            if (target instanceof RedisTarget.Cluster cluster) {
                return ClusterConnections.owned(cluster.seeds(), timeout, prefix, listener);
            }
            return ClusterConnections.shared(((RedisTarget.SharedCluster) target).client(), prefix, listener);
        });
    }

    @Override
    public Mono<AcquireReply> acquire(String name, String owner, long leaseMillis, long floor) {
        AcquireRequest request = new AcquireRequest(name, owner, leaseMillis, floor);
        Mono<AcquireReply> reply;
        if (acquires != null) {
            reply = acquires.send(request);
        } else if (acks.required()) {
            List<AcquireRequest> one = List.of(request);
            reply = acknowledged.acquire(name, owner, keys.lockKey(name), acquireKeys(one), acquireArgs(one, "", ""),
                    list -> alone(acquireReplies(list, 1).get(0), name, "acquire"));
        } else {
            reply = acquireAlone(request);
        }
        return reply.flatMap(this::verified);
    }

    private Mono<AcquireReply> acquireAlone(AcquireRequest request) {
        List<AcquireRequest> one = List.of(request);
        return commands.<Object>evalList(acquireScript, acquireKeys(one), () -> acquireArgs(one, "", ""), request.name(),
                        "acquire")
                .map(list -> alone(acquireReplies(list, 1).get(0), request.name(), "acquire"));
    }

    /**
     * On one server (directly or through Sentinel) without replica acknowledgement: one call of the acquire script
     * for every request, whatever the batcher is doing meanwhile; each lock gets its own reply or error, and a call
     * that fails as a whole fails each request with its own lock's name. On a cluster, whose locks live in many
     * slots, with replica acknowledgement, and on a server that refuses a call whose keys span hash slots (a proxy,
     * which ran nothing of the refused call), each request is a call of its own (the default).
     */
    @Override
    public Mono<List<AcquireResult>> acquireAll(List<LeaseStore.AcquireRequest> requests) {
        if (!oneServer || acks.required() || requests.isEmpty()) {
            return LeaseStore.super.acquireAll(requests);
        }
        List<AcquireRequest> all = new ArrayList<>(requests.size());
        for (LeaseStore.AcquireRequest r : requests) {
            all.add(new AcquireRequest(r.name(), r.owner(), r.leaseMillis(), r.floor()));
        }
        if (crossSlotRefused && all.size() > 1) {
            return LeaseStore.super.acquireAll(requests);
        }
        return Mono.defer(() -> evalTogether(acquireScript, acquireKeys(all), acquireArgs(all, "", "")))
                .map(list -> acquireReplies(list, all.size()))
                .flatMap(replies -> {
                    List<AcquireResult> results = new ArrayList<>(replies.size());
                    boolean granted = false;
                    for (int i = 0; i < replies.size(); i++) {
                        ScriptBatcher.Reply<AcquireReply> reply = replies.get(i);
                        Throwable error = reply.error();
                        if (error != null) {
                            results.add(AcquireResult.failed(commands.classify(error, all.get(i).name(), "acquire")));
                        } else {
                            granted |= reply.value().acquired();
                            results.add(AcquireResult.of(reply.value()));
                        }
                    }
                    // A grant counts once a change of server found after a reconnect has been reported.
                    return granted ? connections.verified().thenReturn(results) : Mono.just(results);
                })
                .onErrorResume(e -> callFailed(e, all.size(), () -> LeaseStore.super.acquireAll(requests),
                        i -> AcquireResult.failed(commands.classify(e, all.get(i).name(), "acquire"))));
    }

    /**
     * A batch call ({@link #acquireAll}, {@link #releaseAll}) that failed as a whole: a call of several locks that
     * the server refused for spanning hash slots ran nothing, so its requests go as single requests do, now and from
     * now on; any other failure is each request's own.
     */
    private <X> Mono<List<X>> callFailed(Throwable error, int requests, java.util.function.Supplier<Mono<List<X>>> each,
            java.util.function.IntFunction<X> failed) {
        if (RedisErrors.crossSlot(error) && requests > 1) {
            crossSlotRefused = true;
            return each.get();
        }
        List<X> results = new ArrayList<>(requests);
        for (int i = 0; i < requests; i++) {
            results.add(failed.apply(i));
        }
        return Mono.just(results);
    }

    /** Several acquires in one call of the acquire script. */
    private Mono<List<ScriptBatcher.Reply<AcquireReply>>> acquireTogether(List<AcquireRequest> requests) {
        return evalTogether(acquireScript, acquireKeys(requests), acquireArgs(requests, "", ""))
                .map(list -> acquireReplies(list, requests.size()));
    }

    /** One call of a script for several locks, connecting first if need be; failures unclassified. */
    private Mono<List<Object>> evalTogether(LuaScript script, String[] scriptKeys, String[] args) {
        return commands.<List<Object>>together(r -> RedisCommands.eval(r, script, ScriptOutputType.MULTI, scriptKeys, args))
                .defaultIfEmpty(List.of());
    }

    /** The reply of a call for one lock; an error the script met for it is the call's failure. */
    private <T> T alone(ScriptBatcher.Reply<T> reply, String name, String operation) {
        if (reply.error() != null) {
            throw commands.classify(reply.error(), name, operation);
        }
        return reply.value();
    }

    /**
     * The acquire script's keys: per lock its lock key, token counter and holder key (one hash tag), all declared
     * so that a cluster routes and refuses the call by every key it may write while a slot moves.
     */
    private String[] acquireKeys(List<AcquireRequest> requests) {
        String[] scriptKeys = new String[requests.size() * 3];
        for (int i = 0; i < requests.size(); i++) {
            String name = requests.get(i).name();
            scriptKeys[3 * i] = keys.lockKey(name);
            scriptKeys[3 * i + 1] = keys.fenceKey(name);
            scriptKeys[3 * i + 2] = keys.holderKey(name);
        }
        return scriptKeys;
    }

    /**
     * The acquire script's arguments: the token scheme, a hand-off's releasing lease ('' for none), then each lock's,
     * then the holder label if the client has one.
     */
    private String[] acquireArgs(List<AcquireRequest> requests, String releasingOwner, String releasingToken) {
        String[] args = new String[3 + requests.size() * 3 + (holderLabel != null ? 1 : 0)];
        if (holderLabel != null) {
            args[args.length - 1] = holderLabel;
        }
        args[0] = serverTimeTokens ? "1" : "";
        args[1] = releasingOwner;
        args[2] = releasingToken;
        for (int i = 0; i < requests.size(); i++) {
            AcquireRequest r = requests.get(i);
            args[3 + 3 * i] = r.owner();
            args[4 + 3 * i] = Long.toString(r.leaseMillis());
            args[5 + 3 * i] = Long.toString(r.floor());
        }
        return args;
    }

    /**
     * The acquire script's reply: two values per lock ({@code 1, token}, {@code 0, holder's remaining ms} or
     * {@code -1, error}), then whether a hand-off released lock 1.
     */
    private static List<ScriptBatcher.Reply<AcquireReply>> acquireReplies(List<Object> reply, int locks) {
        if (reply.size() != 2 * locks + 1) {
            throw new IllegalStateException("the acquire script answered " + reply.size() + " values for " + locks
                    + " lock(s)");
        }
        List<ScriptBatcher.Reply<AcquireReply>> replies = new ArrayList<>(locks);
        for (int i = 0; i < locks; i++) {
            Object status = reply.get(2 * i);
            Object value = reply.get(2 * i + 1);
            if (Long.valueOf(1L).equals(status) && value instanceof Long token) {
                replies.add(ScriptBatcher.Reply.of(AcquireReply.acquired(token)));
            } else if (Long.valueOf(0L).equals(status) && value instanceof Long ttl) {
                replies.add(ScriptBatcher.Reply.of(AcquireReply.busy(ttl)));
            } else {
                replies.add(ScriptBatcher.Reply.failed(new RedisCommandExecutionException(String.valueOf(value))));
            }
        }
        return replies;
    }

    /**
     * One script call: the acquire script, told that a lock holding {@code owner:token} counts as free. It takes
     * the lock over for {@code nextOwner} without a release notification. With replica acknowledgement the
     * default two steps run instead (the acknowledged acquire has a connection of its own).
     */
    @Override
    public Mono<Handoff> handOff(String name, String owner, long token, String nextOwner, long leaseMillis, long floor) {
        if (acks.required()) {
            return LeaseStore.super.handOff(name, owner, token, nextOwner, leaseMillis, floor);
        }
        List<AcquireRequest> next = List.of(new AcquireRequest(name, nextOwner, leaseMillis, floor));
        String[] args = acquireArgs(next, owner, Long.toString(token));
        return commands.<Object>evalList(acquireScript, acquireKeys(next), () -> args, name, "release")
                .flatMap(reply -> {
                    AcquireReply nextReply = alone(acquireReplies(reply, 1).get(0), name, "release");
                    boolean released = Long.valueOf(1L).equals(reply.get(2));
                    return verified(nextReply).map(granted -> new Handoff(released, granted, null));
                });
    }

    /** A grant, once a change of server found after a reconnect has been reported (at once while connected). */
    private Mono<AcquireReply> verified(AcquireReply reply) {
        return reply.acquired() ? connections.verified().thenReturn(reply) : Mono.just(reply);
    }

    @Override
    public Mono<List<Boolean>> renew(List<RenewRequest> leases) {
        return renewals.renew(leases);
    }

    @Override
    public Mono<Boolean> release(String name, String owner, @Nullable Long token) {
        ReleaseRequest request = new ReleaseRequest(name, owner, token);
        return releases != null ? releases.send(request) : releaseAlone(request);
    }

    /**
     * On one server (directly or through Sentinel): one call of the release script for every request, whatever the
     * batcher is doing meanwhile (a batch's releases leave together, not in the batcher's calls of
     * {@value ScriptBatcher#BATCH}); each lease gets its own result or error, and a call that fails as a whole fails
     * each request with its own lock's name. On a cluster, and on a server that refuses a call whose keys span hash
     * slots, each release is sent as {@link #release} sends it (the default).
     */
    @Override
    public Mono<List<ReleaseResult>> releaseAll(List<LeaseStore.ReleaseRequest> requests) {
        if (!oneServer || requests.isEmpty() || (crossSlotRefused && requests.size() > 1)) {
            return LeaseStore.super.releaseAll(requests);
        }
        List<ReleaseRequest> all = new ArrayList<>(requests.size());
        for (LeaseStore.ReleaseRequest r : requests) {
            all.add(new ReleaseRequest(r.name(), r.owner(), r.token()));
        }
        return Mono.defer(() -> evalTogether(releaseScript, releaseKeys(all), releaseArgs(all)))
                .map(list -> {
                    List<ScriptBatcher.Reply<Boolean>> replies = releaseReplies(list, all.size());
                    List<ReleaseResult> results = new ArrayList<>(replies.size());
                    for (int i = 0; i < replies.size(); i++) {
                        ScriptBatcher.Reply<Boolean> reply = replies.get(i);
                        Throwable error = reply.error();
                        results.add(error != null ? ReleaseResult.failed(commands.classify(error, all.get(i).name(),
                                "release")) : ReleaseResult.of(Boolean.TRUE.equals(reply.value())));
                    }
                    return results;
                })
                .onErrorResume(e -> callFailed(e, all.size(), () -> LeaseStore.super.releaseAll(requests),
                        i -> ReleaseResult.failed(commands.classify(e, all.get(i).name(), "release"))));
    }

    private Mono<Boolean> releaseAlone(ReleaseRequest request) {
        List<ReleaseRequest> one = List.of(request);
        return commands.<Object>evalList(releaseScript, releaseKeys(one), () -> releaseArgs(one), request.name(),
                        "release")
                .map(list -> alone(releaseReplies(list, 1).get(0), request.name(), "release"));
    }

    /** Several releases in one call of the release script. */
    private Mono<List<ScriptBatcher.Reply<Boolean>>> releaseTogether(List<ReleaseRequest> requests) {
        return evalTogether(releaseScript, releaseKeys(requests), releaseArgs(requests))
                .map(list -> releaseReplies(list, requests.size()));
    }

    private String[] releaseKeys(List<ReleaseRequest> requests) {
        String[] scriptKeys = new String[requests.size()];
        for (int i = 0; i < requests.size(); i++) {
            scriptKeys[i] = keys.lockKey(requests.get(i).name());
        }
        return scriptKeys;
    }

    /** The release script's arguments: how to notify, then each lease's owner, token ('' for any) and channel. */
    private String[] releaseArgs(List<ReleaseRequest> requests) {
        String[] args = new String[1 + requests.size() * 3];
        args[0] = connections.shardedPubSub() ? "1" : "";
        for (int i = 0; i < requests.size(); i++) {
            ReleaseRequest r = requests.get(i);
            args[1 + 3 * i] = r.owner();
            args[2 + 3 * i] = r.token() == null ? "" : r.token().toString();
            args[3 + 3 * i] = keys.releaseChannel(r.name());
        }
        return args;
    }

    /** The release script's reply: per lease 1 (deleted), 0 (not held) or an error. */
    private static List<ScriptBatcher.Reply<Boolean>> releaseReplies(List<Object> reply, int leases) {
        if (reply.size() != leases) {
            throw new IllegalStateException("the release script answered " + reply.size() + " values for " + leases
                    + " lease(s)");
        }
        List<ScriptBatcher.Reply<Boolean>> released = new ArrayList<>(leases);
        for (Object deleted : reply) {
            released.add(deleted instanceof Long n ? ScriptBatcher.Reply.of(n == 1L)
                    : ScriptBatcher.Reply.failed(new RedisCommandExecutionException(String.valueOf(deleted))));
        }
        return released;
    }

    /**
     * {@code SCAN} pages with {@code MATCH} (the escaped prefix and pattern, inside the hash tag's braces) and a
     * {@code COUNT} of {@link FleetPages#PAGE_SIZE}; on a cluster, Lettuce's cluster scan goes through every primary
     * in turn. Each page's keys are then read by the inspect script: in one call on one server, one call per lock
     * (routed to its slot) on a cluster. {@code SCAN} may return a key twice while the server resizes its key table;
     * a page never lists a lock twice, but two pages may. On a cluster, a slot that moves during the listing to a
     * primary already scanned takes its locks out of the view, and one that moves to a primary not yet scanned may
     * list them twice.
     */
    @Override
    public Flux<LockState> locks(NamePattern pattern) {
        ScanArgs args = ScanArgs.Builder.matches(pattern.scanMatch(keys.prefix())).limit(FleetPages.PAGE_SIZE);
        return FleetPages.stream(ScanCursor.INITIAL, cursor -> scanPage(cursor, args, pattern));
    }

    private Mono<FleetPages.Page<ScanCursor>> scanPage(ScanCursor cursor, ScanArgs args, NamePattern pattern) {
        return commands.<KeyScanCursor<String>>command("", "list locks", r -> r.scan(cursor, args))
                .flatMap(page -> {
                    Set<String> names = new LinkedHashSet<>();
                    for (String key : page.getKeys()) {
                        String name = pattern.nameIn(keys.prefix(), key);
                        if (name != null) {
                            names.add(name);
                        }
                    }
                    ScanCursor next = page.isFinished() ? null : page;
                    return inspect(List.copyOf(names)).map(locks -> new FleetPages.Page<>(locks, next));
                });
    }

    /** The held locks among {@code names}, read by the inspect script. */
    private Mono<List<LockState>> inspect(List<String> names) {
        if (names.isEmpty()) {
            return Mono.just(List.of());
        }
        if (oneServer) {
            String[] scriptKeys = new String[names.size() * 2];
            for (int i = 0; i < names.size(); i++) {
                scriptKeys[2 * i] = keys.lockKey(names.get(i));
                scriptKeys[2 * i + 1] = keys.holderKey(names.get(i));
            }
            return commands.<Object>evalList(LuaScript.INSPECT, scriptKeys, () -> new String[0],
                    names.size() == 1 ? names.get(0) : "", "inspect locks").map(reply -> lockStates(names, reply));
        }
        // The keys of one page live in many slots: one call per lock, pipelined on the cluster connection.
        return Flux.fromIterable(names)
                .flatMapSequential(name -> commands.<Object>evalList(LuaScript.INSPECT,
                        new String[] {keys.lockKey(name), keys.holderKey(name)}, () -> new String[0], name, "inspect lock")
                        .map(reply -> lockStates(List.of(name), reply)), 32)
                .concatMapIterable(list -> list)
                .collectList();
    }

    /** The inspect script's reply: per lock its token ('' when free), remaining ms and label ('' when none). */
    private static List<LockState> lockStates(List<String> names, List<Object> reply) {
        if (reply.size() != 3 * names.size()) {
            throw new IllegalStateException("the inspect script answered " + reply.size() + " values for " + names.size()
                    + " lock(s)");
        }
        List<LockState> held = new ArrayList<>(names.size());
        for (int i = 0; i < names.size(); i++) {
            String token = String.valueOf(reply.get(3 * i));
            if (token.isEmpty()) {
                continue; // released between the scan and the read
            }
            long ttl = reply.get(3 * i + 1) instanceof Long n ? n : 0;
            String label = String.valueOf(reply.get(3 * i + 2));
            held.add(new LockState(names.get(i), Long.parseLong(token), Math.max(0, ttl), label.isEmpty() ? null : label));
        }
        return held;
    }

    @Override
    public Mono<LockState> lock(String name) {
        return commands.<Object>evalList(LuaScript.INSPECT, new String[] {keys.lockKey(name), keys.holderKey(name)},
                        () -> new String[0], name, "inspect lock")
                .flatMapIterable(reply -> lockStates(List.of(name), reply))
                .next();
    }

    @Override
    public Mono<Broken> breakLock(String name, long expectedToken) {
        String[] scriptKeys = {keys.lockKey(name), keys.fenceKey(name), keys.holderKey(name)};
        String expected = expectedToken == 0 ? "" : Long.toString(expectedToken);
        return commands.<Object>evalList(LuaScript.FORCE_RELEASE, scriptKeys,
                        () -> new String[] {connections.shardedPubSub() ? "1" : "", keys.releaseChannel(name), expected},
                        name, "force-release")
                .map(reply -> {
                    if (reply.size() != 3) {
                        throw new IllegalStateException("the force-release script answered " + reply.size() + " values");
                    }
                    if (!Long.valueOf(1L).equals(reply.get(0))) {
                        return Broken.NOTHING;
                    }
                    String label = String.valueOf(reply.get(2));
                    return new Broken(true, Long.parseLong(String.valueOf(reply.get(1))), label.isEmpty() ? null : label);
                });
    }

    @Override
    public Flux<Long> releases(String name) {
        return watches.releases(name);
    }

    @Override
    public Flux<String> serverChanges() {
        return serverChanges.asFlux();
    }

    @Override
    public boolean neverSent(Throwable error) {
        return RedisErrors.neverSent(error);
    }

    @Override
    public boolean onIoThread() {
        // Lettuce runs on Netty's event loops.
        return Thread.currentThread() instanceof io.netty.util.concurrent.FastThreadLocalThread;
    }

    @Override
    public Mono<Void> ping() {
        return commands.command("", "ping", RedisClusterReactiveCommands::ping).then();
    }

    @Override
    public Mono<Void> close() {
        watches.close();
        return connections.close();
    }

    /** One acquire, as the batcher carries it. */
    private record AcquireRequest(String name, String owner, long leaseMillis, long floor) {
    }

    /** One release, as the batcher carries it. */
    private record ReleaseRequest(String name, String owner, @Nullable Long token) {
    }
}
