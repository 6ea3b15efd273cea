package dev.fenced.lock.internal.redis;

import dev.fenced.lock.LockServiceException;
import dev.fenced.lock.internal.KeyLayout;
import dev.fenced.lock.internal.LeaseStore.RenewRequest;
import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.cluster.SlotHash;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Renewal routing: the leases of one renewal tick go out in batches of up to {@value #MAX_RENEW_BATCH}, one
 * script call per batch: on one server, every lease together; on a Redis Cluster of Redis 7 or later, the
 * leases served by one node together ({@code renew-node.lua}, flagged {@code allow-cross-slot-keys}), and a key
 * that node no longer has is asked again through its own slot, so a reshard never loses a lease by mistake;
 * on an older cluster, one call per slot. Lettuce pipelines the calls on the one command connection.
 * Thread-safe.
 */
final class RenewalRouter {

    /** Leases renewed by one script call at most, so that one call never holds Redis for long. */
    static final int MAX_RENEW_BATCH = 256;

    private final RedisCommands commands;
    private final RedisConnections connections;
    private final KeyLayout keys;
    // Read here, on the thread that builds the client: reading resources on an event loop would block it.
    private final LuaScript renewScript = LuaScript.RENEW;
    private final LuaScript renewOnNodeScript = LuaScript.RENEW_ON_NODE;

    RenewalRouter(RedisCommands commands, RedisConnections connections, KeyLayout keys) {
        this.commands = commands;
        this.connections = connections;
        this.keys = keys;
    }

    /**
     * Extends every lease whose lock still holds its {@code owner:token}, in as few script calls as the
     * deployment allows.
     *
     * @param leases the leases
     * @return for each lease, in order, whether it was still held
     */
    Mono<List<Boolean>> renew(List<RenewRequest> leases) {
        if (leases.isEmpty()) {
            return Mono.just(List.of());
        }
        Boolean[] held = new Boolean[leases.size()];
        List<Mono<Void>> batches = new ArrayList<>();
        for (List<Integer> group : groups(leases)) {
            for (int from = 0; from < group.size(); from += MAX_RENEW_BATCH) {
                List<Integer> batch = group.subList(from, Math.min(group.size(), from + MAX_RENEW_BATCH));
                batches.add(renewGroup(leases, batch).doOnNext(replies -> {
                    for (int i = 0; i < batch.size(); i++) {
                        held[batch.get(i)] = replies.get(i);
                    }
                }).then());
            }
        }
        // Lettuce pipelines the batches on the one connection.
        return Flux.mergeSequential(batches).then(Mono.fromSupplier(() -> {
            List<Boolean> result = new ArrayList<>(held.length);
            for (Boolean h : held) {
                result.add(Boolean.TRUE.equals(h));
            }
            return result;
        }));
    }

    /**
     * The leases (as indices) that can share one script call: on one server, all; on a cluster of Redis 7
     * or later, those on one node; on an older cluster, those in one slot.
     */
    private Collection<List<Integer>> groups(List<RenewRequest> leases) {
        Map<Object, List<Integer>> groups = new LinkedHashMap<>();
        boolean byNode = connections.cluster() && connections.server().atLeast(7);
        for (int i = 0; i < leases.size(); i++) {
            String key = keys.lockKey(leases.get(i).name());
            Object group = !connections.cluster() ? "" : byNode ? connections.nodeOf(key) : SlotHash.getSlot(key);
            groups.computeIfAbsent(group, g -> new ArrayList<>()).add(i);
        }
        return groups.values();
    }

    private Mono<List<Boolean>> renewGroup(List<RenewRequest> leases, List<Integer> batch) {
        if (!connections.cluster()) {
            return renewInSlot(leases, batch);
        }
        if (!connections.server().atLeast(7)) {
            return renewPerSlot(leases, batch);
        }
        return renewOnNode(leases, batch);
    }

    /** One call for leases of several slots of one cluster node; what it cannot settle goes slot by slot. */
    private Mono<List<Boolean>> renewOnNode(List<RenewRequest> leases, List<Integer> batch) {
        String[] args = new String[batch.size() * 3];
        for (int i = 0; i < batch.size(); i++) {
            RenewRequest r = leases.get(batch.get(i));
            args[3 * i] = Long.toString(r.leaseMillis());
            args[3 * i + 1] = r.owner() + ":" + r.token();
            args[3 * i + 2] = keys.lockKey(r.name());
        }
        String[] scriptKeys = {args[2]};
        return commands.<Long>evalList(renewOnNodeScript, scriptKeys, () -> args, "", "renew " + batch.size() + " lease(s)")
                .flatMap(reply -> {
                    List<Integer> missing = new ArrayList<>();
                    for (int i = 0; i < batch.size(); i++) {
                        if (i >= reply.size() || reply.get(i) == 2L) {
                            missing.add(batch.get(i));
                        }
                    }
                    if (missing.isEmpty()) {
                        return Mono.just(reply.stream().map(r -> r == 1L).toList());
                    }
                    // Expired, or moved by a reshard: ask the slot's owner, following redirections.
                    return renewPerSlot(leases, missing).map(again -> {
                        List<Boolean> held = new ArrayList<>(batch.size());
                        int next = 0;
                        for (int i = 0; i < batch.size(); i++) {
                            held.add(i < reply.size() && reply.get(i) != 2L ? reply.get(i) == 1L : again.get(next++));
                        }
                        return held;
                    });
                })
                // A key no longer on the node (the topology changed under us): go slot by slot.
                .onErrorResume(LockServiceException.class, e -> e.getCause() instanceof RedisCommandExecutionException
                        ? renewPerSlot(leases, batch) : Mono.error(e));
    }

    /** One call per slot, in the order of {@code batch}. */
    private Mono<List<Boolean>> renewPerSlot(List<RenewRequest> leases, List<Integer> batch) {
        Map<Integer, List<Integer>> slots = new LinkedHashMap<>();
        for (int index : batch) {
            slots.computeIfAbsent(SlotHash.getSlot(keys.lockKey(leases.get(index).name())), s -> new ArrayList<>()).add(index);
        }
        Map<Integer, Boolean> held = new ConcurrentHashMap<>();
        return Flux.fromIterable(slots.values())
                .flatMapSequential(inSlot -> renewInSlot(leases, inSlot).doOnNext(replies -> {
                    for (int i = 0; i < inSlot.size(); i++) {
                        held.put(inSlot.get(i), replies.get(i));
                    }
                }))
                .then(Mono.fromSupplier(() -> batch.stream().map(i -> held.getOrDefault(i, false)).toList()));
    }

    /** One call with every lock key declared: they must share a slot on a cluster. */
    private Mono<List<Boolean>> renewInSlot(List<RenewRequest> leases, List<Integer> batch) {
        String[] scriptKeys = new String[batch.size()];
        String[] args = new String[batch.size() * 2];
        for (int i = 0; i < batch.size(); i++) {
            RenewRequest r = leases.get(batch.get(i));
            scriptKeys[i] = keys.lockKey(r.name());
            args[2 * i] = Long.toString(r.leaseMillis());
            args[2 * i + 1] = r.owner() + ":" + r.token();
        }
        String what = batch.size() == 1 ? leases.get(batch.get(0)).name() : "";
        return commands.<Long>evalList(renewScript, scriptKeys, () -> args, what, "renew " + batch.size() + " lease(s)")
                .map(reply -> {
                    List<Boolean> held = new ArrayList<>(reply.size());
                    for (Long r : reply) {
                        held.add(r == 1L);
                    }
                    return held;
                });
    }
}
