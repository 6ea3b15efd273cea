package dev.fenced.torture;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.testservices.TcpProxy;
import io.lettuce.core.ScriptOutputType;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import reactor.core.Disposable;

/**
 * The nemeses of the scenarios of issue #5 and of the PostgreSQL arm (issue #17, scenarios {@code P…}: the same
 * workload with the locks in a PostgreSQL lease table), and the scripted witnesses that force the interleaving a
 * scenario is about (so that a control arm is flagged on every run, not only on lucky ones).
 */
final class Scenarios {

    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(Scenarios.class);

    /** Sets a counter back by ARGV[1], if it exists; returns its new value, or -1. */
    private static final String SET_BACK = "if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end "
            + "return redis.call('DECRBY', KEYS[1], ARGV[1])";

    /** Failover rounds in which the new primary re-issued the paused witness's token, across runs. */
    static final java.util.concurrent.atomic.AtomicLong REISSUED_TOKENS = new java.util.concurrent.atomic.AtomicLong();

    /** Rounds of scenario 9 that set the counter back, across runs. */
    static final java.util.concurrent.atomic.AtomicLong COUNTER_FALLBACKS = new java.util.concurrent.atomic.AtomicLong();

    /**
     * Rounds of scenario 9 in which the holder granted after the fallback got a token below the stalled holder's,
     * across runs: what counter-only tokens do, and the default tokens must not.
     */
    static final java.util.concurrent.atomic.AtomicLong GRANTS_BELOW_STALLED = new java.util.concurrent.atomic.AtomicLong();

    /**
     * Acquires of the reset witness (4b) that failed although the lock service ran them (the lock's counter moved on),
     * across runs: proof that the reset came after the acquire was executed, not before it was.
     */
    static final java.util.concurrent.atomic.AtomicLong ACQUIRES_RUN_REPLY_LOST = new java.util.concurrent.atomic.AtomicLong();

    /** Writes of the child JVM frozen with SIGSTOP (scenarios 1 and P1) that storage rejected, across runs. */
    static final java.util.concurrent.atomic.AtomicLong FROZEN_WRITES_REJECTED = new java.util.concurrent.atomic.AtomicLong();

    /** Restarts of the lease database by scenario P2, across runs. */
    static final java.util.concurrent.atomic.AtomicLong DATABASE_RESTARTS = new java.util.concurrent.atomic.AtomicLong();

    /** Acquires cancelled before they emitted a lease, across runs: proof that scenario 6 cancelled anything. */
    static final java.util.concurrent.atomic.AtomicLong CANCELLED_IN_FLIGHT = new java.util.concurrent.atomic.AtomicLong();

    /**
     * Rounds of scenario P6 in which the witness's acquire really waited on the held lease row when its connection was
     * reset, across runs.
     */
    static final java.util.concurrent.atomic.AtomicLong RESETS_WHILE_WAITING = new java.util.concurrent.atomic.AtomicLong();

    private static final int STORM_THREADS = 6;
    private static final List<String> STORM_RESOURCES = List.of("storm-0", "storm-1", "storm-2", "storm-3");

    private Scenarios() {
    }

    /**
     * (1) Stalls longer than the lease: the workers' own long pauses (renewal thread frozen), plus a child JVM
     * frozen with SIGSTOP past its lease while another holder writes, which then attempts its write.
     */
    static Run.Nemesis stalls(int freezes) {
        return context -> {
            String resource = context.setup.witnessResources().get(0);
            TcpProxy proxy = context.service.clientProxy();
            try (FrozenChild child = FrozenChild.start(context.setup.arm(), context.service.endpoint(proxy), context.ledgerUrl,
                    context.ledger, context.prefix, context.leaseTime())) {
                Worker witness = context.worker("witness", List.of(resource));
                for (int round = 1; round <= freezes; round++) {
                    History.Op op = child.freezeRound(resource, "child-" + round, context.history, () -> {
                        try {
                            witness.operate(resource, false, 0, false);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    });
                    context.history.record(op);
                    if (op.outcome() == History.Outcome.STALE) {
                        FROZEN_WRITES_REJECTED.incrementAndGet();
                    }
                }
            }
            while (context.timeLeft()) {
                context.pace(100);
            }
        };
    }

    /** (2) The primary restarted without persistence, alternating with FLUSHALL. */
    static Run.Nemesis restartAndFlush(long everyMillis) {
        return context -> {
            boolean restart = true;
            while (context.timeLeft()) {
                context.pace(everyMillis);
                long at = System.nanoTime();
                if (restart) {
                    context.redis().restartPrimary();
                } else {
                    context.redis().flushAll();
                }
                context.history.fault(restart ? "restart" : "flushall", at, System.nanoTime());
                restart = !restart;
            }
        };
    }

    /**
     * (P2) The lease database restarted, alternately after a fast shutdown and after an immediate one (every server
     * process quits at once and the next start recovers from the WAL, as after a crash). Leases, counters and the
     * account and audit rows are committed data: before each restart the nemesis reads every lease row's token and
     * counts the audit rows, and after it every lease row must still be there with at least that token, and no audit
     * row may be missing. Each restart fails unless the postmaster really changed, and the run fails unless it
     * restarted the server both ways.
     */
    static Run.Nemesis restartDatabase(long everyMillis) {
        return context -> {
            PostgresTopology postgres = context.postgres();
            Map<RestartablePostgres.Shutdown, Integer> restarts = new java.util.EnumMap<>(RestartablePostgres.Shutdown.class);
            RestartablePostgres.Shutdown next = RestartablePostgres.Shutdown.FAST;
            while (context.timeLeft()) {
                context.pace(everyMillis);
                Map<String, Long> tokens = postgres.tokens();
                long audited = postgres.rows(context.ledger.audit);
                long at = System.nanoTime();
                postgres.restart(next);
                context.history.fault("restart (" + next + " shutdown)", at, System.nanoTime());
                restarts.merge(next, 1, Integer::sum);
                requireSurvived(postgres, tokens, audited, context.ledger.audit, next);
                next = next == RestartablePostgres.Shutdown.FAST ? RestartablePostgres.Shutdown.IMMEDIATE
                        : RestartablePostgres.Shutdown.FAST;
            }
            if (restarts.size() < RestartablePostgres.Shutdown.values().length) {
                throw new IllegalStateException("The database was not restarted both ways (" + restarts
                        + "): the scenario tested less than it says");
            }
            DATABASE_RESTARTS.addAndGet(restarts.values().stream().mapToInt(Integer::intValue).sum());
            LOG.info("Restarts of the lease database, by shutdown mode: {}; every lease and audit row survived", restarts);
        };
    }

    private static void requireSurvived(PostgresTopology postgres, Map<String, Long> tokens, long audited, String audit,
            RestartablePostgres.Shutdown shutdown) {
        Map<String, Long> after = postgres.tokens();
        for (Map.Entry<String, Long> row : tokens.entrySet()) {
            Long token = after.get(row.getKey());
            if (token == null || token < row.getValue()) {
                throw new IllegalStateException("A restart (" + shutdown + " shutdown) lost a committed lease row: "
                        + row.getKey() + " had token " + row.getValue() + ", now " + token);
            }
        }
        long auditedAfter = postgres.rows(audit);
        if (auditedAfter < audited) {
            throw new IllegalStateException("A restart (" + shutdown + " shutdown) lost committed audit rows: "
                    + audited + " before, " + auditedAfter + " after");
        }
    }

    /**
     * (3) Failover that loses writes, with a witness: a lease is granted by the primary after replication was
     * cut, the replica is promoted and re-issues the same token to a second holder, which claims and reads;
     * then the first holder, paused since its read, writes; then the second writes.
     */
    static Run.Nemesis failover(long everyMillis) {
        return context -> {
            String resource = context.setup.witnessResources().get(0);
            Locker first = context.locker("witness-a");
            Locker second = context.locker("witness-b");
            int round = 0;
            while (context.timeLeft()) {
                context.pace(everyMillis);
                failoverRound(context, resource, first, second, ++round);
            }
        };
    }

    private static void failoverRound(Run.Context context, String resource, Locker first, Locker second, int round) {
        Witness a = new Witness(context, "witness-a", first);
        Witness b = new Witness(context, "witness-b", second);
        // A write that replicates, so the replica's token counter is just below what the primary issues next.
        a.fullOperation(resource, "wf" + round + "-clean");
        if (!context.redis().awaitReplicated()) {
            throw new IllegalStateException("The replica did not catch up before the failover of round " + round);
        }
        long cutAt = System.nanoTime();
        context.redis().cutReplication();
        Witness.Step paused = a.acquireClaimRead(resource, "wf" + round + "-paused");
        context.redis().failover();
        context.history.fault("failover", cutAt, System.nanoTime());
        Witness.Step newer = null;
        for (int attempt = 1; attempt <= 3 && newer == null; attempt++) {
            Witness.Held held = b.acquire(resource, "wf" + round + "-newer-" + attempt);
            if (held != null) {
                if (paused != null && held.grant().token() == paused.grant().token()) {
                    REISSUED_TOKENS.incrementAndGet();
                }
                newer = b.claimAndRead(held, false);
            }
        }
        if (paused != null) {
            a.writeAndRelease(paused, true);
        }
        if (newer != null) {
            b.writeAndRelease(newer, false);
        }
    }

    /** (4) A connection reset after an acquire reached the lock service, before its reply reached the client. */
    static Run.Nemesis resetAfterAcquire(long everyMillis) {
        return context -> {
            List<TcpProxy> proxies = context.workerProxies();
            while (context.timeLeft()) {
                context.pace(everyMillis);
                TcpProxy proxy = proxies.get(ThreadLocalRandom.current().nextInt(proxies.size()));
                long at = System.nanoTime();
                proxy.resetAfterRequestContaining(context.service.acquireMarker(), 1);
                context.history.fault("reset-after-acquire", at, at);
            }
            int fired = proxies.stream().mapToInt(TcpProxy::resetsFired).sum();
            if (fired == 0) {
                throw new IllegalStateException("No connection was reset after an acquire: the scenario tested nothing");
            }
            LOG.info("Connections reset after an acquire: {}", fired);
        };
    }

    /** (4b) The witness of (4) alone, while the workers run: see {@link #resetWitness}. */
    static Run.Nemesis lostAcquireReply() {
        return Scenarios::resetWitness;
    }

    /**
     * Witness of (4): a client with a long lease loses the reply of an acquire that the lock service executed. The
     * acquire fails, so nobody knows the lock is held; once the client is connected again, that lock must be gone (the
     * client undoes what the failed attempt may have taken), not left until its lease expires. A failed acquire after
     * which the lock's counter had moved on ran in the service: {@link #ACQUIRES_RUN_REPLY_LOST} counts those.
     */
    private static void resetWitness(Run.Context context) throws InterruptedException {
        String resource = context.setup.witnessResources().get(0);
        String lockId = context.prefix + "{" + resource + "}";
        TcpProxy proxy = context.service.clientProxy();
        FencedLockClient client = context.client(proxy, b -> b.leaseTime(Duration.ofSeconds(20)));
        client.ping().block(Duration.ofSeconds(10));
        long counterBefore = context.service.counter(lockId);
        proxy.resetAfterRequestContaining(context.service.acquireMarker(), 1);
        long at = System.nanoTime();
        try {
            dev.fenced.lock.FencedLease lease = client.acquire(resource).block(Duration.ofSeconds(30));
            if (lease != null) {
                // The reply arrived after all (the reset hit another command): nothing was orphaned.
                context.history.knownOwner(lease.ownerId());
                lease.release().block(Duration.ofSeconds(10));
            }
        } catch (RuntimeException expected) {
            // The reply was lost: the acquire fails, and its lock, if taken, has no known holder.
            if (proxy.resetsFired() > 0 && context.service.counter(lockId) > counterBefore) {
                ACQUIRES_RUN_REPLY_LOST.incrementAndGet();
            }
        }
        for (int attempt = 0; attempt < 100; attempt++) {
            try {
                client.ping().block(Duration.ofSeconds(5));
                break;
            } catch (RuntimeException reconnecting) {
                context.pace(50);
            }
        }
        context.history.fault("reset-after-acquire (witness)", at, System.nanoTime());
        checkOrphans(context, List.of(resource));
    }

    /**
     * (P6) A reset while an acquire waits on a row lock, PostgreSQL store. Each round: a transaction locks the witness
     * lock's row {@code FOR KEY SHARE}, as a lease check does until its fenced write commits; a witness with a 20 s
     * lease tries to acquire and waits on the row in the database; its connection is reset (every other round with new
     * connections refused meanwhile, so that the cancel request cannot reach the database and only the undo, repeated
     * over the statement's own bound, can catch a grant); the transaction commits. Then no lock of an unknown owner may
     * remain. Between rounds the same is done to a workers' lock for a moment, resetting the connection of whichever
     * worker's acquire waits on it.
     */
    static Run.Nemesis resetWhileAcquireWaits(long everyMillis) {
        return context -> {
            PostgresTopology postgres = context.postgres();
            String resource = context.setup.witnessResources().get(0);
            TcpProxy proxy = context.service.clientProxy();
            FencedLockClient witness = context.client(proxy, b -> b.leaseTime(Duration.ofSeconds(20)));
            // The row must exist for a transaction to lock it; a release leaves it in place.
            dev.fenced.lock.FencedLease first = witness.acquire(resource).block(Duration.ofSeconds(30));
            if (first != null) {
                context.history.knownOwner(first.ownerId());
                first.release().block(Duration.ofSeconds(10));
            }
            List<TcpProxy> workers = new ArrayList<>(context.workerProxies());
            for (int round = 0; context.timeLeft(); round++) {
                context.pace(everyMillis);
                resetWitnessWhileItWaits(context, postgres, witness, proxy, resource, round % 2 == 1);
                resetWorkersWhileTheyWait(context, postgres, workers);
            }
        };
    }

    private static void resetWitnessWhileItWaits(Run.Context context, PostgresTopology postgres, FencedLockClient witness,
            TcpProxy proxy, String resource, boolean refuseCancel) throws Exception {
        // Idle pooled connections, so that the undo answers at once, before the row is free.
        reactor.core.publisher.Flux.range(0, 3).flatMap(i -> witness.ping()).blockLast(Duration.ofSeconds(10));
        long at = System.nanoTime();
        try (PostgresTopology.RowHold hold = postgres.holdRowForKeyShare(context.prefix + "{" + resource + "}")) {
            proxy.markRequestContaining(context.service.acquireMarker());
            java.util.concurrent.CompletableFuture<dev.fenced.lock.FencedLease> acquire = witness.tryAcquire(resource).toFuture();
            boolean waiting = awaitWaiter(context, postgres, hold);
            proxy.refuseNew(refuseCancel);
            if (proxy.resetMarked() > 0 && waiting) {
                RESETS_WHILE_WAITING.incrementAndGet();
            }
            try {
                dev.fenced.lock.FencedLease lease = acquire.get(30, TimeUnit.SECONDS);
                if (lease != null) {
                    // The reset hit before the acquire was sent, or after its reply: nothing was orphaned.
                    context.history.knownOwner(lease.ownerId());
                    lease.release().block(Duration.ofSeconds(10));
                }
            } catch (java.util.concurrent.ExecutionException expected) {
                // The acquire failed; whatever it may still take in the database has no known holder.
            }
            // The undo of the failed acquire has had its first answer ("nothing held"): pacing, not synchronisation.
            context.pace(200);
        } finally {
            proxy.refuseNew(false);
        }
        context.history.fault("reset while an acquire waits on a row lock (witness)", at, System.nanoTime());
        checkOrphans(context, List.of(resource));
    }

    private static void resetWorkersWhileTheyWait(Run.Context context, PostgresTopology postgres, List<TcpProxy> workers)
            throws Exception {
        String resource = context.setup.resources().get(ThreadLocalRandom.current().nextInt(context.setup.resources().size()));
        String lockId = context.prefix + "{" + resource + "}";
        if (context.service.counter(lockId) == 0) {
            return; // no row yet
        }
        long at = System.nanoTime();
        try (PostgresTopology.RowHold hold = postgres.holdRowForKeyShare(lockId)) {
            workers.forEach(p -> p.markRequestContaining(context.service.acquireMarker()));
            if (awaitWaiter(context, postgres, hold)) {
                workers.forEach(TcpProxy::resetMarked);
            }
        }
        context.history.fault("reset while an acquire waits on a row lock (workers)", at, System.nanoTime());
    }

    /** Waits, at most 2 s, until some session waits for the row that {@code hold} locks. */
    private static boolean awaitWaiter(Run.Context context, PostgresTopology postgres, PostgresTopology.RowHold hold)
            throws InterruptedException {
        long giveUp = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
        while (postgres.sessionsWaitingFor(hold.pid) == 0) {
            if (System.nanoTime() - giveUp > 0) {
                return false;
            }
            context.pace(5);
        }
        return true;
    }

    /** (5) A partition of some workers from the lock service, longer than the lease, while they renew. */
    static Run.Nemesis partition(long everyMillis) {
        return context -> {
            List<TcpProxy> proxies = new ArrayList<>(context.workerProxies());
            while (context.timeLeft()) {
                context.pace(everyMillis);
                partitionOnce(context, proxies);
            }
        };
    }

    /**
     * (L) The lock-set workload's faults: partitions of half of the workers from the lock service every
     * {@code everyMillis} (as {@link #partition}), each after a scripted take-over on the witness resource, so that
     * every run has a paused writer whatever the workers' random pauses did: a holder reads the set (claiming its row
     * on the fenced arms) and checks its lease, then pauses with its renewal frozen for three leases; another holder
     * takes the lock once the lease expired, writes its element and releases; then the paused holder writes its set
     * back with a view of the lease that still believes it is held. Storage must refuse that write on the fenced arms;
     * on the controls it overwrites the newer holder's element, which the checker's I7 must flag. The run fails if no
     * round produced the take-over.
     */
    static Run.Nemesis lockSetPartitions(long everyMillis) {
        return context -> {
            String resource = context.setup.witnessResources().get(0);
            Witness paused = new Witness(context, "witness-paused", context.locker("witness-paused"));
            Witness next = new Witness(context, "witness-next", context.locker("witness-next"));
            List<TcpProxy> proxies = new ArrayList<>(context.workerProxies());
            int takeOvers = 0;
            for (int round = 1; context.timeLeft(); round++) {
                if (lockSetTakeOver(context, resource, paused, next, round)) {
                    takeOvers++;
                }
                if (!context.timeLeft()) {
                    break;
                }
                partitionOnce(context, proxies);
                context.pace(everyMillis);
            }
            if (takeOvers == 0) {
                throw new IllegalStateException("No round of the lock-set take-over had a newer holder write during the "
                        + "pause: the scenario's paused writer tested nothing");
            }
            LOG.info("Lock-set: {} scripted take-overs of a paused holder", takeOvers);
        };
    }

    /** One take-over of {@link #lockSetPartitions}; false if a step could not run (recorded as such). */
    private static boolean lockSetTakeOver(Run.Context context, String resource, Witness paused, Witness next, int round)
            throws InterruptedException {
        Witness.Held held = paused.acquire(resource, "ls" + round + "-paused");
        if (held == null) {
            return false;
        }
        Witness.SetStep step = paused.claimReadSetAndCheck(held);
        if (step == null) {
            return false;
        }
        long at = System.nanoTime();
        Thread thaws = paused.stall(held, context.leaseTime().toMillis() * 3);
        // Waits for the paused holder's lease to expire (the renewal is frozen), then writes and releases.
        Witness.Held newer = next.acquire(resource, "ls" + round + "-next");
        Witness.SetStep written = newer == null ? null : next.claimReadSetAndCheck(newer);
        History.Outcome outcome = written == null ? History.Outcome.LOST : next.writeSetAndRelease(written, false);
        thaws.join();
        context.history.fault("lock-set holder paused past its lease", at, System.nanoTime());
        paused.writeSetAndRelease(step, true);
        return outcome == History.Outcome.OK;
    }

    /**
     * (12) Partitions that come and go: half of the workers, drawn anew each time, cut from the lock service for
     * {@code onLeases} lease times, then everyone connected for {@code offLeases} lease times, and again.
     */
    static Run.Nemesis flappingPartitions(int onLeases, int offLeases) {
        return context -> {
            List<TcpProxy> proxies = new ArrayList<>(context.workerProxies());
            long lease = context.leaseTime().toMillis();
            while (context.timeLeft()) {
                Collections.shuffle(proxies);
                List<TcpProxy> cut = proxies.subList(0, Math.max(1, proxies.size() / 2));
                long at = System.nanoTime();
                cut.forEach(TcpProxy::blackhole);
                try {
                    context.pace(lease * onLeases);
                } finally {
                    cut.forEach(TcpProxy::resume);
                }
                context.history.fault("partition (" + onLeases + " leases on)", at, System.nanoTime());
                context.pace(lease * offLeases);
            }
        };
    }

    private static void partitionOnce(Run.Context context, List<TcpProxy> proxies) throws InterruptedException {
        Collections.shuffle(proxies);
        List<TcpProxy> cut = proxies.subList(0, Math.max(1, proxies.size() / 2));
        long at = System.nanoTime();
        cut.forEach(TcpProxy::blackhole);
        try {
            // The fault's length, not synchronisation: longer than the lease.
            context.pace(context.leaseTime().toMillis() * 2);
        } finally {
            cut.forEach(TcpProxy::resume);
        }
        context.history.fault("partition", at, System.nanoTime());
    }

    /**
     * (6) Subscribers cancelled mid-acquire: cancellers with their own client (replies delayed, so cancels land
     * while the acquire is on the wire) acquire the workers' resources and cancel after a random time, and a
     * storm of cancels with tiny maximum waits runs on locks of its own. Then every lock key must belong to a
     * known holder: a key of a cancelled acquire is a lock left behind.
     */
    static Run.Nemesis cancelMidAcquire(int cancellers) {
        return context -> {
            // The cancellers subscribe with lambdas, which Reactor lets drop a lease that arrives as they are
            // disposed; the library releases such leases once its hook is installed, as its docs ask.
            FencedLockClient.releaseLeasesDroppedBySubscribers();
            TcpProxy proxy = context.service.clientProxy();
            proxy.delayReplies(5);
            FencedLockClient client = context.client(proxy, b -> b.leaseTime(Duration.ofSeconds(10)));
            // A storm on locks of their own: maximum waits of 1-30 ms and cancels within 4 ms, replies 2 ms late,
            // so that cancels, wait deadlines and replies race.
            TcpProxy stormProxy = context.service.clientProxy();
            stormProxy.delayReplies(2);
            FencedLockClient storm = context.client(stormProxy, b -> b.leaseTime(Duration.ofSeconds(10)));
            warmUp(storm);
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < STORM_THREADS; i++) {
                threads.add(context.background("torture-storm-" + i,
                        () -> cancelLoop(context, storm, STORM_RESOURCES, 30, 4_000)));
            }
            warmUp(client);
            for (int i = 0; i < cancellers; i++) {
                threads.add(context.background("torture-canceller-" + i, () -> cancelLoop(context, client)));
            }
            while (context.timeLeft()) {
                context.pace(100);
            }
            for (Thread thread : threads) {
                thread.interrupt();
                thread.join(TimeUnit.SECONDS.toMillis(30));
            }
            List<String> all = new ArrayList<>(context.setup.resources());
            all.addAll(STORM_RESOURCES);
            checkOrphans(context, all);
        };
    }

    /** Acquires of scenario 11 abandoned by each way a subscriber can give up on them, across runs. */
    static final Map<String, java.util.concurrent.atomic.AtomicLong> ABANDONED_ACQUIRES = new java.util.concurrent.ConcurrentHashMap<>();

    private static final List<String> ORPHAN_RESOURCES = java.util.stream.IntStream.range(0, 12)
            .mapToObj(i -> "orphan-" + i).toList();

    /** The lease of scenario 11's client: short, so that a lock nobody renews is gone well before the final check. */
    private static final Duration ORPHAN_LEASE = Duration.ofSeconds(1);

    /**
     * (11) The orphan-renewal regressions other lock clients have shipped fixes for: a lease left renewed for ever
     * after its acquire was cancelled or timed out at an arbitrary point. {@code threads} threads of one client (1 s
     * lease, replies delayed by 0 to 3 ms, changed every 200 ms, so that the give-up lands before, on and after the
     * reply) acquire locks of their own and give up on them in each way Reactor offers: {@code timeout}, the loser of
     * {@code Mono.firstWithSignal}, {@code Flux.take(Duration)}, the other acquire of {@code Flux.merge(...).next()}, a
     * lambda subscriber disposed, and a maximum wait shorter than the reply. A lease that reaches the harness is
     * released at once (its owner is known). Once they stop, the garbage collector runs (a lease that Reactor drops
     * without a trace is released when it is collected), and after two leases and the undo bound, the client must
     * hold no lease, must renew nothing for three renewal periods, and the server must hold none of those locks:
     * each one left is an orphan (I4, and the orphan column). The acquires go on for {@code minDuration}, and then
     * until {@code minAbandoned} were given up on in all, within the run's duration.
     */
    static Run.Nemesis orphanRegressions(int threads, long minAbandoned, Duration minDuration) {
        return context -> {
            FencedLockClient.releaseLeasesDroppedBySubscribers();
            java.util.concurrent.atomic.AtomicLong renewals = new java.util.concurrent.atomic.AtomicLong();
            TcpProxy proxy = context.service.clientProxy();
            FencedLockClient client = context.client(proxy,
                    b -> b.leaseTime(ORPHAN_LEASE).observer(countingRenewals(renewals)));
            warmUp(client);
            List<Thread> loops = new ArrayList<>();
            for (int i = 0; i < threads; i++) {
                loops.add(context.background("torture-orphan-" + i, () -> abandonLoop(context, client)));
            }
            ThreadLocalRandom random = ThreadLocalRandom.current();
            long start = abandonedAcquires();
            long minEnd = System.nanoTime() + minDuration.toNanos();
            // For minDuration at least, and until minAbandoned acquires were given up on, within the run's duration
            // (a bound under load).
            while (context.timeLeft() && (System.nanoTime() - minEnd < 0 || abandonedAcquires() - start < minAbandoned)) {
                proxy.delayReplies(random.nextInt(4));
                context.pace(200);
            }
            proxy.delayReplies(0);
            for (Thread loop : loops) {
                loop.interrupt();
                loop.join(TimeUnit.SECONDS.toMillis(30));
            }
            // Leases dropped without a trace are released once collected; then every unrenewed lock expires and
            // every undo ends (it is bounded by the lease).
            System.gc();
            context.pace(ORPHAN_LEASE.toMillis() * 2 + 1_000);
            System.gc();
            context.pace(ORPHAN_LEASE.toMillis());
            long renewed = checkClientLeases(context, client, renewals, ORPHAN_LEASE.dividedBy(3), "every acquire ended");
            for (String resource : ORPHAN_RESOURCES) {
                LockService.Holder holder = context.service.holder(context.prefix + "{" + resource + "}");
                if (holder != null) {
                    context.history.orphan(resource + " held by " + (context.history.isKnownOwner(holder.owner())
                            ? "an owner whose lease reached the harness" : "an unknown owner") + " " + holder.owner() + " with "
                            + holder.remainingMillis() + " ms of its lease left, " + ORPHAN_LEASE.multipliedBy(4).toMillis()
                            + " ms after every acquire ended");
                }
            }
            LOG.info("Scenario 11: acquires abandoned by way: {}; renewals in the last three periods: {}",
                    ABANDONED_ACQUIRES, renewed);
        };
    }

    private static long abandonedAcquires() {
        return ABANDONED_ACQUIRES.values().stream().mapToLong(java.util.concurrent.atomic.AtomicLong::get).sum();
    }

    /**
     * The client-side end check of (11) and the soak, made while {@code client} is still open (closing it would
     * release what it holds): it must hold no lease and, in the three renewal periods of {@code renewalPeriod} that
     * follow, renew none ({@code renewals} counts its renewals). Anything else is an orphan, recorded in the
     * history. Returns the renewals seen.
     */
    private static long checkClientLeases(Run.Context context, FencedLockClient client,
            java.util.concurrent.atomic.AtomicLong renewals, Duration renewalPeriod, String after) throws InterruptedException {
        long renewedBefore = renewals.get();
        int heldBefore = client.heldLeases();
        context.pace(renewalPeriod.toMillis() * 3);
        long renewed = renewals.get() - renewedBefore;
        int held = Math.max(heldBefore, client.heldLeases());
        if (held > 0 || renewed > 0) {
            context.history.orphan("the client still holds " + held + " leases that nobody knows of and renewed "
                    + renewed + " in three renewal periods after " + after);
        }
        return renewed;
    }

    /** A lock observer that counts the renewals of its client's leases into {@code renewals}. */
    private static dev.fenced.lock.LockObserver countingRenewals(java.util.concurrent.atomic.AtomicLong renewals) {
        return new dev.fenced.lock.LockObserver() {
            @Override
            public void leasesRenewed(int count) {
                renewals.addAndGet(count);
            }
        };
    }

    /** One thread of (11): acquires and gives up on them, each time in another way and at another moment. */
    private static void abandonLoop(Run.Context context, FencedLockClient client) {
        ThreadLocalRandom random = ThreadLocalRandom.current();
        while (!Thread.currentThread().isInterrupted() && context.isRunning()) {
            String resource = ORPHAN_RESOURCES.get(random.nextInt(ORPHAN_RESOURCES.size()));
            String other = ORPHAN_RESOURCES.get(random.nextInt(ORPHAN_RESOURCES.size()));
            // Around the reply: the proxy delays it by 0-3 ms, the round trip itself takes a fraction of one.
            Duration giveUp = Duration.ofNanos(random.nextLong(TimeUnit.MILLISECONDS.toNanos(5)));
            int way = random.nextInt(6);
            String name = switch (way) {
                case 0 -> "timeout";
                case 1 -> "firstWithSignal";
                case 2 -> "take";
                case 3 -> "next";
                case 4 -> "dispose";
                default -> "maxWait";
            };
            ABANDONED_ACQUIRES.computeIfAbsent(name, n -> new java.util.concurrent.atomic.AtomicLong()).incrementAndGet();
            try {
                switch (way) {
                    case 0 -> keep(context, client.acquire(resource).timeout(giveUp).onErrorResume(e -> reactor.core.publisher.Mono.empty())
                            .block(Duration.ofSeconds(10)));
                    case 1 -> keep(context, reactor.core.publisher.Mono.firstWithSignal(client.acquire(resource),
                            reactor.core.publisher.Mono.delay(giveUp).then(reactor.core.publisher.Mono.<dev.fenced.lock.FencedLease>empty()))
                            .block(Duration.ofSeconds(10)));
                    case 2 -> client.acquire(resource).flux().take(giveUp).toStream().forEach(lease -> keep(context, lease));
                    case 3 -> keep(context, reactor.core.publisher.Flux.merge(client.acquire(resource), client.acquire(other)).next()
                            .block(Duration.ofSeconds(10)));
                    case 4 -> {
                        Disposable acquire = client.acquire(resource).subscribe(lease -> keep(context, lease), e -> { });
                        TimeUnit.NANOSECONDS.sleep(giveUp.toNanos());
                        acquire.dispose();
                    }
                    default -> keep(context, client.acquire(resource, AcquireOptions.defaults().withMaxWait(
                                    Duration.ofMillis(1 + random.nextInt(3))))
                            .onErrorResume(e -> reactor.core.publisher.Mono.empty()).block(Duration.ofSeconds(10)));
                }
            } catch (InterruptedException e) {
                return;
            } catch (RuntimeException e) {
                if (Thread.currentThread().isInterrupted()) {
                    return;
                }
                // A lock service error or a give-up surfaced as an error: what it took, if anything, is the client's.
            }
        }
    }

    /** A lease that reached the harness: its owner is known, and it is released at once. */
    private static void keep(Run.Context context, dev.fenced.lock.@Nullable FencedLease lease) {
        if (lease != null) {
            context.history.knownOwner(lease.ownerId());
            lease.release().subscribe(null, e -> { });
        }
    }

    /**
     * Connects a canceller client and loads its scripts before the cancels start. (Owner ids are drawn per
     * acquisition and name no client, so a lock left behind cannot be attributed to one.)
     */
    private static void warmUp(FencedLockClient client) {
        dev.fenced.lock.FencedLease probe = client.acquire("warm-up").block(Duration.ofSeconds(10));
        if (probe != null) {
            probe.release().block(Duration.ofSeconds(10));
        }
    }

    static void cancelLoop(Run.Context context, FencedLockClient client) {
        cancelLoop(context, client, context.setup.resources(), 2_000, 12_000);
    }

    /**
     * Acquires a random one of {@code resources} with a random maximum wait below {@code maxWaitMillis}, and
     * cancels it after a random time below {@code cancelAfterMicros}; a lease that arrives first is released.
     */
    static void cancelLoop(Run.Context context, FencedLockClient client, List<String> resources, long maxWaitMillis,
            long cancelAfterMicros) {
        ThreadLocalRandom random = ThreadLocalRandom.current();
        while (!Thread.currentThread().isInterrupted() && context.isRunning()) {
            String resource = resources.get(random.nextInt(resources.size()));
            Duration maxWait = Duration.ofMillis(random.nextLong(1, maxWaitMillis + 1));
            Disposable acquire = client.acquire(resource, AcquireOptions.defaults().withMaxWait(maxWait))
                    .doOnCancel(CANCELLED_IN_FLIGHT::incrementAndGet)
                    .subscribe(lease -> {
                        context.history.knownOwner(lease.ownerId());
                        lease.release().subscribe(null, e -> { });
                    }, e -> { });
            try {
                // Mostly around when the (delayed) reply arrives, where cancel and emission race.
                TimeUnit.MICROSECONDS.sleep(random.nextLong(cancelAfterMicros / 4, cancelAfterMicros));
            } catch (InterruptedException e) {
                acquire.dispose();
                return;
            } finally {
                acquire.dispose();
            }
        }
    }

    /**
     * A lock key held, for a whole second, by an owner no holder knows: the long lease of an acquire that was
     * cancelled or failed and not undone. A worker's key becomes known within milliseconds of its acquire.
     */
    private static void checkOrphans(Run.Context context, List<String> resources) throws InterruptedException {
        Map<String, String> suspects = new HashMap<>();
        for (String resource : resources) {
            LockService.Holder holder = unknownHolder(context, resource);
            if (holder != null) {
                suspects.put(resource, holder.owner());
            }
        }
        long giveUp = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
        while (!suspects.isEmpty() && System.nanoTime() - giveUp < 0) {
            context.pace(20);
            suspects.entrySet().removeIf(e -> {
                LockService.Holder holder = unknownHolder(context, e.getKey());
                return holder == null || !holder.owner().equals(e.getValue());
            });
        }
        suspects.forEach((resource, owner) -> {
            LockService.Holder holder = unknownHolder(context, resource);
            long left = holder == null ? 0 : holder.remainingMillis();
            context.history.orphan(resource + " held by unknown owner " + owner + " (a cancelled or failed acquire), "
                    + left + " ms of its lease left");
        });
    }

    private static LockService.@Nullable Holder unknownHolder(Run.Context context, String resource) {
        LockService.Holder holder = context.service.holder(context.prefix + "{" + resource + "}");
        return holder == null || context.history.isKnownOwner(holder.owner()) ? null : holder;
    }

    /** (7) SCRIPT FLUSH: the client must fall back from EVALSHA to EVAL. */
    static Run.Nemesis scriptFlush(long everyMillis) {
        return context -> {
            // Every client has loaded its scripts by now; from here on an EVAL can only be a NOSCRIPT fallback.
            context.pace(1_000);
            context.redis().onPrimary(c -> c.configResetstat());
            while (context.timeLeft()) {
                context.pace(everyMillis);
                long at = System.nanoTime();
                context.redis().scriptFlush();
                context.history.fault("script-flush", at, System.nanoTime());
            }
            String stats = context.redis().onPrimary(c -> c.info("commandstats"));
            if (!stats.contains("cmdstat_eval:")) {
                throw new IllegalStateException("No EVAL ran after SCRIPT FLUSH: the NOSCRIPT fallback was not exercised");
            }
        };
    }

    /**
     * (9) Redis's token counter falls back by {@code grantsBack} grants while their holders are stalled. Each round,
     * on the witness lock: a witness writes, so storage holds its token; two more take the lock one after the other
     * and stall before their first write, renewals frozen, until their leases expired; the nemesis sets the lock's
     * counter back by {@code grantsBack} grants (what a restart without persistence or a failover that lost writes
     * does to grants that storage never saw), and the workers' counters with it; a new holder takes the lock,
     * claims, reads and writes; then the stalled holders wake and claim, read and write with the leases they still
     * believe held, the later-granted first. With counter-only tokens the new holder's token is below the second
     * stalled holder's, whose write storage then accepts after the new holder's: only I6 sees it. Each round checks
     * that the counter stood at the second stalled holder's token and really went back, and the run fails if no
     * round set it back.
     */
    static Run.Nemesis counterFallback(int grantsBack) {
        if (grantsBack < 2) {
            throw new IllegalArgumentException("The counter must fall back by at least two grants, not " + grantsBack);
        }
        return context -> {
            String resource = context.setup.witnessResources().get(0);
            Witness writer = new Witness(context, "witness-b", context.locker("witness-b"));
            Witness first = new Witness(context, "witness-x1", context.locker("witness-x1"));
            Witness second = new Witness(context, "witness-x2", context.locker("witness-x2"));
            int round = 0;
            int fellBack = 0;
            while (context.timeLeft()) {
                context.pace(100);
                if (fallbackRound(context, resource, writer, first, second, grantsBack, ++round)) {
                    fellBack++;
                }
            }
            if (fellBack == 0) {
                throw new IllegalStateException("No round set the counter back: the scenario tested nothing");
            }
        };
    }

    /** One round of (9); false if a witness could not take its step, and the counter was not set back. */
    private static boolean fallbackRound(Run.Context context, String resource, Witness writer, Witness first,
            Witness second, int grantsBack, int round) throws InterruptedException {
        // Storage learns the lock's current token. A claim refused after an earlier round's fallback teaches the
        // writer's client the floor, and its next attempt passes it.
        Witness.Step before = null;
        for (int attempt = 1; attempt <= 3 && before == null; attempt++) {
            before = writer.acquireClaimRead(resource, "cf" + round + "-before-" + attempt);
        }
        if (before == null) {
            return false;
        }
        writer.writeAndRelease(before, false);
        long stall = context.leaseTime().toMillis() * 2;
        Witness.Held stalledFirst = first.acquire(resource, "cf" + round + "-stalled-1");
        if (stalledFirst == null) {
            return false;
        }
        Thread firstThaws = first.stall(stalledFirst, stall);
        // Granted once the first stalled holder's lease expired in Redis.
        Witness.Held stalledSecond = second.acquire(resource, "cf" + round + "-stalled-2");
        if (stalledSecond == null) {
            firstThaws.join();
            first.abandon(stalledFirst, "the next stalled holder could not acquire");
            return false;
        }
        Thread secondThaws = second.stall(stalledSecond, stall);
        long at = System.nanoTime();
        long counter = setBackCounter(context, resource, grantsBack);
        if (counter + grantsBack != stalledSecond.grant().token()) {
            throw new IllegalStateException("The counter of " + resource + " stood at " + (counter + grantsBack)
                    + ", not at the stalled holder's token " + stalledSecond.grant().token());
        }
        for (String account : context.setup.resources()) {
            setBackCounter(context, account, grantsBack);
        }
        context.history.fault("counter-fallback", at, System.nanoTime());
        COUNTER_FALLBACKS.incrementAndGet();
        // Granted once the second stalled holder's lease expired in Redis.
        Witness.Step newer = writer.acquireClaimRead(resource, "cf" + round + "-newer");
        if (newer != null) {
            if (newer.grant().token() < stalledSecond.grant().token()) {
                GRANTS_BELOW_STALLED.incrementAndGet();
            }
            writer.writeAndRelease(newer, false);
        }
        secondThaws.join();
        firstThaws.join();
        second.wakeAndWrite(stalledSecond);
        first.wakeAndWrite(stalledFirst);
        return true;
    }

    /**
     * Sets the token counter of {@code resource} back by {@code grants}, if it exists; returns its new value (or
     * {@code -1}, if there was no counter).
     */
    private static long setBackCounter(Run.Context context, String resource, int grants) {
        String key = context.prefix + "{" + resource + "}" + RedisTopology.COUNTER_SUFFIX;
        Long value = context.redis().onPrimary(c -> c.eval(SET_BACK, ScriptOutputType.INTEGER, new String[] {key},
                Integer.toString(grants)));
        return value == null ? -1 : value;
    }

    /** Locks of paused holders broken by scenario 13's operator (outcome RELEASED, the paused holder's token), across runs. */
    static final java.util.concurrent.atomic.AtomicLong BREAKS = new java.util.concurrent.atomic.AtomicLong();

    /**
     * Locks of scenario 13 broken before their holder's pause ended, across runs (a slow round may break the lock just
     * after the thaw: the holder then renewed once before the break, and the rest of the round is the same).
     */
    static final java.util.concurrent.atomic.AtomicLong BREAKS_WHILE_PAUSED = new java.util.concurrent.atomic.AtomicLong();

    /** Rounds of scenario 13 whose next grant's token was above the broken one, across runs. */
    static final java.util.concurrent.atomic.AtomicLong NEXT_GRANTS_ABOVE_BROKEN = new java.util.concurrent.atomic.AtomicLong();

    /** Rounds of scenario 13 whose next grant's token was not above the broken one (none may be), across runs. */
    static final java.util.concurrent.atomic.AtomicLong NEXT_GRANTS_NOT_ABOVE_BROKEN = new java.util.concurrent.atomic.AtomicLong();

    /**
     * Broken holders of scenario 13 whose lease was lost with {@code NOT_HELD} before anything released it, within one
     * lease of the thaw, across runs: their first renewal after the break found the lock gone.
     */
    static final java.util.concurrent.atomic.AtomicLong BROKEN_LOST_NOT_HELD = new java.util.concurrent.atomic.AtomicLong();

    /**
     * Broken holders of scenario 13 whose lease was not lost with {@code NOT_HELD} by then (another reason, or not
     * within the lease), across runs: none may be.
     */
    static final java.util.concurrent.atomic.AtomicLong BROKEN_NOT_LOST_IN_TIME = new java.util.concurrent.atomic.AtomicLong();

    /** Late writes of scenario 13's broken holders refused by storage, across runs. */
    static final java.util.concurrent.atomic.AtomicLong BROKEN_WRITES_REFUSED = new java.util.concurrent.atomic.AtomicLong();

    /** Late writes of scenario 13's broken holders that storage accepted (the control arm's danger), across runs. */
    static final java.util.concurrent.atomic.AtomicLong BROKEN_WRITES_ACCEPTED = new java.util.concurrent.atomic.AtomicLong();

    /**
     * The paused holder's lease in scenario 13: five times the run's, so that the lock is freed by the break, long
     * before it would expire by itself, and renewed every second (a third of it).
     */
    private static final Duration PAUSED_HOLDER_LEASE = Duration.ofSeconds(3);

    /**
     * (13) An operator breaks the lock of a paused holder. Each round, on the witness lock: a holder with a lease of
     * {@link #PAUSED_HOLDER_LEASE} acquires, claims and reads, and stalls (renewals frozen) for one and a half renewal
     * periods; meanwhile an operator, with a client of its own, lists the run's held locks ({@code locks("*")}, the
     * fleet view), finds the witness lock held by the paused holder's label with its token, and force-releases it with
     * a reason; the outcome must be {@code RELEASED} with the paused holder's token. Another holder then takes the lock
     * (its token must be above the broken one: both are recorded), claims, reads and writes. The paused holder thaws:
     * its overdue renewal runs first, and its lease must be lost with {@code NOT_HELD} then (the nemesis waits for the
     * loss signal at most one lease, and counts a loss for another reason, or none, as late); then it writes with the
     * view of the lease it had before the pause, which still says held. Storage must refuse that write on the fenced
     * arms (and the checker sees the rest: I1, I2 and M1); the control arm ({@link Arm#LEASE_CHECK}: the lease checked,
     * then an unfenced write) lets it through after the newer holder's write, a lost update the checker must flag. The
     * run fails if no round broke a lock.
     */
    static Run.Nemesis forceReleasePaused() {
        return context -> {
            String resource = context.setup.witnessResources().get(0);
            Witness paused = new Witness(context, "witness-paused", context.locker("witness-paused", PAUSED_HOLDER_LEASE));
            Witness next = new Witness(context, "witness-next", context.locker("witness-next"));
            FencedLockClient operator = context.client(context.service.clientProxy(),
                    b -> b.holderLabel("torture operator"));
            // Connected before the first round, so that the operator acts within the pause from the first round on.
            operator.locks("*").then().block(Duration.ofSeconds(10));
            int broken = 0;
            for (int round = 1; context.timeLeft(); round++) {
                if (breakRound(context, resource, paused, next, operator, round)) {
                    broken++;
                }
                context.pace(100);
            }
            if (broken == 0) {
                throw new IllegalStateException("No round broke the lock of a paused holder: the scenario tested nothing");
            }
            LOG.info("Scenario 13: {} locks of paused holders broken", broken);
        };
    }

    /**
     * One round of (13); false if the paused holder could not acquire (recorded as such). A round whose next holder
     * could not take the broken lock (recorded too) sends no late write: storage has seen no newer token then.
     */
    private static boolean breakRound(Run.Context context, String resource, Witness paused, Witness next,
            FencedLockClient operator, int round) throws InterruptedException {
        Witness.Step step = paused.acquireClaimRead(resource, "fr" + round + "-paused");
        if (step == null) {
            return false;
        }
        Grant grant = step.grant();
        Thread thaws = paused.stall(step.held(), PAUSED_HOLDER_LEASE.toMillis() / 2);
        long at = System.nanoTime();
        // The operator's view: whoever holds the witness lock, by the label its client stored with the grant.
        dev.fenced.lock.LockInfo seen = operator.locks("*").filter(l -> l.name().equals(resource))
                .next().block(Duration.ofSeconds(10));
        if (seen == null || seen.token() != grant.token()
                || !Locker.Fenced.label("witness-paused").equals(seen.holderLabel())) {
            thaws.join();
            throw new IllegalStateException("The fleet view did not show " + resource + " held by the paused holder (token "
                    + grant.token() + "): " + seen);
        }
        dev.fenced.lock.ForceReleaseResult result = operator.forceRelease(resource, "torture operator: holder '"
                + seen.holderLabel() + "' paused, round " + round).block(Duration.ofSeconds(10));
        context.history.fault("force-release of a paused holder", at, System.nanoTime());
        if (result == null || result.outcome() != dev.fenced.lock.ForceReleaseResult.Outcome.RELEASED
                || result.token() != grant.token()) {
            thaws.join();
            throw new IllegalStateException("The force-release of " + resource + " held by the paused holder (token "
                    + grant.token() + ") answered " + result);
        }
        BREAKS.incrementAndGet();
        if (thaws.isAlive()) {
            BREAKS_WHILE_PAUSED.incrementAndGet();
        }
        // Another holder takes the lock the break freed, long before the paused holder's lease would have expired.
        Witness.Step newer = null;
        for (int attempt = 1; attempt <= 3 && newer == null; attempt++) {
            newer = next.acquireClaimRead(resource, "fr" + round + "-next-" + attempt);
        }
        if (newer != null) {
            boolean above = newer.grant().token() > result.token();
            (above ? NEXT_GRANTS_ABOVE_BROKEN : NEXT_GRANTS_NOT_ABOVE_BROKEN).incrementAndGet();
            LOG.info("Scenario 13, round {}: broken token {}, next grant's token {}", round, result.token(),
                    newer.grant().token());
            next.writeAndRelease(newer, false);
        }
        thaws.join();
        // The overdue renewal runs on the thaw: the lease must be lost then, NOT_HELD (the lock is gone).
        dev.fenced.lock.LeaseLostException loss;
        try {
            loss = grant.requireLease().lost().block(PAUSED_HOLDER_LEASE);
        } catch (IllegalStateException notWithinTheLease) {
            loss = null;
        }
        if (loss != null && loss.reason() == dev.fenced.lock.LossReason.NOT_HELD) {
            BROKEN_LOST_NOT_HELD.incrementAndGet();
        } else {
            BROKEN_NOT_LOST_IN_TIME.incrementAndGet();
            LOG.warn("Scenario 13, round {}: the broken holder's lease was not lost NOT_HELD at its renewal: {}", round,
                    loss == null ? "no loss within the lease" : loss.reason());
        }
        if (newer == null) {
            // Storage has seen no newer token, so the late write would be accepted, as the README says: not this test.
            paused.abandon(step.held(), "the next holder could not take the broken lock");
            return true;
        }
        // The paused holder goes on as if it still held the lock: its write carries the view it had before the pause.
        if (paused.writeAndRelease(step, true) == History.Outcome.STALE) {
            BROKEN_WRITES_REFUSED.incrementAndGet();
        } else {
            BROKEN_WRITES_ACCEPTED.incrementAndGet();
        }
        return true;
    }

    /** Rounds of scenario C3 whose newer holder got a token below the stalled holder's, across runs. */
    static final java.util.concurrent.atomic.AtomicLong GRANTS_BELOW_STALLED_BY_CLOCK = new java.util.concurrent.atomic.AtomicLong();

    /** Clock steps of the C scenarios, backwards and forwards, across runs. */
    static final java.util.concurrent.atomic.AtomicLong CLOCK_STEPS_BACK = new java.util.concurrent.atomic.AtomicLong();
    static final java.util.concurrent.atomic.AtomicLong CLOCK_STEPS_FORWARD = new java.util.concurrent.atomic.AtomicLong();

    /**
     * (C1) The lock server's clock stepped backwards and forwards, the token counter kept: every {@code everyMillis}
     * the clock is set to a new offset within {@code maxStepSeconds} of the real time, alternately behind and ahead of
     * where it was. A step forward expires leases early (key expiry follows the wall clock); a step back makes them
     * last longer.
     */
    static Run.Nemesis clockSteps(long everyMillis, double maxStepSeconds) {
        return context -> {
            FakeClockRedis redis = context.fakeClock();
            ThreadLocalRandom random = ThreadLocalRandom.current();
            boolean back = true;
            while (context.timeLeft()) {
                context.pace(everyMillis);
                double now = redis.clockOffset();
                double next = back ? now - random.nextDouble(0.2, maxStepSeconds) : now + random.nextDouble(0.2, maxStepSeconds);
                next = Math.max(-maxStepSeconds, Math.min(maxStepSeconds, next));
                long at = System.nanoTime();
                redis.setClock(next);
                (next < now ? CLOCK_STEPS_BACK : CLOCK_STEPS_FORWARD).incrementAndGet();
                context.history.fault(String.format(java.util.Locale.ROOT, "clock step %+.2f s", next - now), at, System.nanoTime());
                back = !back;
            }
        };
    }

    /**
     * (C2) The clock stepped as in C1, and every other step the server restarted without persistence (the token
     * counters lost) with its clock set ahead of the most it was ever ahead: the next tokens, server time in
     * microseconds, are above every token issued before.
     */
    static Run.Nemesis clockStepsAndRestarts(long everyMillis, double maxStepSeconds) {
        return context -> {
            FakeClockRedis redis = context.fakeClock();
            ThreadLocalRandom random = ThreadLocalRandom.current();
            double highest = 0;
            boolean restart = false;
            while (context.timeLeft()) {
                context.pace(everyMillis);
                double now = redis.clockOffset();
                long at = System.nanoTime();
                if (restart) {
                    double next = highest + random.nextDouble(0.05, 0.5);
                    redis.setClock(next);
                    redis.restart();
                    CLOCK_STEPS_FORWARD.incrementAndGet();
                    context.history.fault(String.format(java.util.Locale.ROOT, "restart, clock %+.2f s (ahead of ever)",
                            next - now), at, System.nanoTime());
                } else {
                    double next = highest - random.nextDouble(0.2, maxStepSeconds);
                    redis.setClock(next);
                    CLOCK_STEPS_BACK.incrementAndGet();
                    context.history.fault(String.format(java.util.Locale.ROOT, "clock step %+.2f s", next - now), at,
                            System.nanoTime());
                }
                highest = Math.max(highest, redis.clockOffset());
                restart = !restart;
            }
        };
    }

    /**
     * (C3) The window the root README states, forced: the counter lost and the clock behind. Each round, on the witness
     * lock: a witness writes (storage holds its token T0); a second later another takes the lock (T1) and stalls before
     * its first write, renewals frozen for twice the lease; the server restarts without persistence with its clock set
     * back so that its time lies halfway between T0 and T1 (behind the clock that issued T1 by more than the time
     * between the two grants); the first witness takes the lock again (T2, below T1), claims, reads and writes; then the
     * stalled holder wakes and claims, reads and writes with the lease it believes held. Its token is above the stored
     * one, so storage accepts it, after a write of a later grant: I6 and M1 see it. Each round checks that T2 fell
     * between T0 and T1 ({@link #GRANTS_BELOW_STALLED_BY_CLOCK}).
     */
    static Run.Nemesis clockBehindAfterRestart() {
        return context -> {
            FakeClockRedis redis = context.fakeClock();
            String resource = context.setup.witnessResources().get(0);
            Witness writer = new Witness(context, "witness-b", context.locker("witness-b"));
            Witness stalled = new Witness(context, "witness-x1", context.locker("witness-x1"));
            for (int round = 1; context.timeLeft(); round++) {
                Witness.Step before = null;
                for (int attempt = 1; attempt <= 20 && before == null; attempt++) {
                    before = writer.acquireClaimRead(resource, "cb" + round + "-before-" + attempt);
                    if (before == null) {
                        context.pace(50);
                    }
                }
                if (before == null) {
                    continue;
                }
                long stored = before.grant().token();
                writer.writeAndRelease(before, false);
                context.pace(1_000);
                Witness.Held held = stalled.acquire(resource, "cb" + round + "-stalled");
                if (held == null) {
                    continue;
                }
                Thread thaws = stalled.stall(held, context.leaseTime().toMillis() * 2);
                long at = System.nanoTime();
                long target = stored + (held.grant().token() - stored) / 2;
                double offset = redis.clockOffset() + (target - redis.serverTimeMicros()) / 1e6;
                redis.setClock(offset);
                redis.restart();
                CLOCK_STEPS_BACK.incrementAndGet();
                context.history.fault(String.format(java.util.Locale.ROOT, "restart, clock set to %+.3f s", offset), at,
                        System.nanoTime());
                Witness.Step newer = null;
                for (int attempt = 1; attempt <= 20 && newer == null; attempt++) {
                    // The client fails fast while it reconnects to the restarted server: back off and retry.
                    newer = writer.acquireClaimRead(resource, "cb" + round + "-newer-" + attempt);
                    if (newer == null) {
                        context.pace(50);
                    }
                }
                if (newer != null) {
                    if (newer.grant().token() < held.grant().token() && newer.grant().token() > stored) {
                        GRANTS_BELOW_STALLED_BY_CLOCK.incrementAndGet();
                    }
                    writer.writeAndRelease(newer, false);
                }
                thaws.join();
                stalled.wakeAndWrite(held);
            }
        };
    }

    /** (8) A soak: all of the above, chosen at random, with cancellers running throughout. */
    static Run.Nemesis soak() {
        return soak(0);
    }

    /**
     * (8) The soak, until at least {@code operations} fenced writes were accepted or refused by storage (lost and
     * unknown outcomes not counted; 0: for the run's duration), within the run's duration, which then bounds it.
     * At the end, while its client is open, the canceller's client must hold and renew no lease (as in (11)).
     */
    static Run.Nemesis soak(long operations) {
        return context -> {
            ThreadLocalRandom random = ThreadLocalRandom.current();
            TcpProxy cancelProxy = context.service.clientProxy();
            cancelProxy.delayReplies(5);
            java.util.concurrent.atomic.AtomicLong renewals = new java.util.concurrent.atomic.AtomicLong();
            FencedLockClient cancelClient = context.client(cancelProxy, b -> b.leaseTime(Duration.ofSeconds(10))
                    .renewalPeriod(SOAK_CANCELLER_RENEWAL).observer(countingRenewals(renewals)));
            Thread canceller = context.background("torture-canceller", () -> cancelLoop(context, cancelClient));
            String resource = context.setup.witnessResources().get(0);
            Locker first = context.locker("witness-a");
            Locker second = context.locker("witness-b");
            FrozenChild child = context.closeLater(FrozenChild.start(context.setup.arm(),
                    context.service.endpoint(context.service.clientProxy()), context.ledgerUrl, context.ledger, context.prefix,
                    context.leaseTime()));
            Worker witness = context.worker("witness", List.of(resource));
            List<TcpProxy> proxies = new ArrayList<>(context.workerProxies());
            int round = 0;
            while (context.timeLeft() && (operations == 0 || context.history.fencedWriteCount() < operations)) {
                context.pace(300 + random.nextLong(700));
                round++;
                long at = System.nanoTime();
                switch (random.nextInt(8)) {
                    case 0 -> {
                        context.redis().restartPrimary();
                        context.history.fault("restart", at, System.nanoTime());
                    }
                    case 1 -> {
                        context.redis().flushAll();
                        context.history.fault("flushall", at, System.nanoTime());
                    }
                    case 2 -> {
                        context.redis().scriptFlush();
                        context.history.fault("script-flush", at, System.nanoTime());
                    }
                    case 3 -> partitionOnce(context, proxies);
                    case 4 -> {
                        proxies.get(random.nextInt(proxies.size())).resetAfterRequestContaining(context.service.acquireMarker(), 1);
                        context.history.fault("reset-after-acquire", at, at);
                    }
                    case 5 -> failoverRound(context, resource, first, second, round);
                    case 6 -> context.history.record(child.freezeRound(resource, "child-" + round, context.history, () -> {
                        try {
                            witness.operate(resource, false, 0, false);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    }));
                    default -> {
                        TcpProxy slow = proxies.get(random.nextInt(proxies.size()));
                        slow.delayReplies(context.leaseTime().toMillis() / 4);
                        context.pace(context.leaseTime().toMillis());
                        slow.delayReplies(0);
                        context.history.fault("delay", at, System.nanoTime());
                    }
                }
            }
            // (11)'s end check on the canceller's client, before the run closes it (which would release what it
            // holds): once its last acquire ended, it holds and renews nothing, and no unknown owner holds a lock.
            canceller.interrupt();
            canceller.join(TimeUnit.SECONDS.toMillis(30));
            long settle = System.nanoTime() + SOAK_CANCELLER_SETTLE.toNanos();
            while (cancelClient.heldLeases() > 0 && System.nanoTime() - settle < 0) {
                context.pace(50);
            }
            int held = cancelClient.heldLeases();
            long renewed = checkClientLeases(context, cancelClient, renewals, SOAK_CANCELLER_RENEWAL,
                    "the canceller's last acquire ended up to " + SOAK_CANCELLER_SETTLE.toMillis() + " ms before");
            LOG.info("Soak: the canceller's client held {} leases at the end check and renewed {} in three renewal periods",
                    held, renewed);
            checkOrphans(context, context.setup.resources());
        };
    }

    /** The renewal period of the soak's canceller client: short, so that its end check takes a second or two. */
    private static final Duration SOAK_CANCELLER_RENEWAL = Duration.ofMillis(500);

    /**
     * How long the soak's end check lets the canceller's last acquire settle (its maximum wait is below 2 s, and a
     * lease that arrived is released at once) before its client must hold nothing.
     */
    private static final Duration SOAK_CANCELLER_SETTLE = Duration.ofSeconds(5);

    /** Shared statements (P14): multi-row acquire statements that completed, carrying several locks, across runs. */
    static final java.util.concurrent.atomic.AtomicLong SHARED_ACQUIRES = new java.util.concurrent.atomic.AtomicLong();
    /** Locks carried by the multi-row acquire statements sent, across runs. */
    static final java.util.concurrent.atomic.AtomicLong SHARED_ACQUIRE_LOCKS = new java.util.concurrent.atomic.AtomicLong();
    /** Multi-row release statements that completed, carrying several locks, across runs. */
    static final java.util.concurrent.atomic.AtomicLong SHARED_RELEASES = new java.util.concurrent.atomic.AtomicLong();
    /** Locks carried by the multi-row release statements sent, across runs. */
    static final java.util.concurrent.atomic.AtomicLong SHARED_RELEASE_LOCKS = new java.util.concurrent.atomic.AtomicLong();
    /** One-statement hand-offs that took the lock over (the statement answered a row), across runs. */
    static final java.util.concurrent.atomic.AtomicLong HAND_OFFS = new java.util.concurrent.atomic.AtomicLong();
    /** Multi-row statements the stores' own batchers counted, acquires and releases, across runs. */
    static final java.util.concurrent.atomic.AtomicLong STORE_SHARED_ACQUIRES = new java.util.concurrent.atomic.AtomicLong();
    static final java.util.concurrent.atomic.AtomicLong STORE_SHARED_RELEASES = new java.util.concurrent.atomic.AtomicLong();
    /** Statements of the shared clients that PostgreSQL aborted with "deadlock detected" (40P01), across runs. */
    static final java.util.concurrent.atomic.AtomicLong SHARED_CLIENT_DEADLOCKS = new java.util.concurrent.atomic.AtomicLong();
    /** Connections reset right after a shared acquire, hand-off or shared release was sent, across runs. */
    static final java.util.concurrent.atomic.AtomicLong RESETS_AFTER_SHARED = new java.util.concurrent.atomic.AtomicLong();
    /** The per-kind counts of the last run of P14, for the report. */
    static volatile String sharedStatementCounts = "";

    /** The text of the multi-row acquire statement only (its requests' columns). */
    private static final String SHARED_ACQUIRE_MARKER = "AS r(lock_id, owner, ms, floor, i)";
    /** The text of the one-statement hand-off only. */
    private static final String HAND_OFF_MARKER = "FOR UPDATE SKIP LOCKED) INSERT";
    /** The text of the multi-row release statement only. */
    private static final String SHARED_RELEASE_MARKER = "AS r(lock_id, owner, token, i)";

    /**
     * (P14) Shared statements on the PostgreSQL store: the run's workers are lanes of a few lock clients with shared
     * statements on ({@link Run.Setup#lanesPerClient()}), contending on the accounts, while the lanes' own pauses freeze
     * their client's renewal thread. Every {@code everyMillis}, in turn on a random client: its connection is reset
     * right after it sent a shared acquire, a hand-off or a shared release (the statement ran, its reply is lost); an
     * account's lease row is held {@code FOR KEY SHARE} for 50-150 ms, as a fenced write transaction's lease check holds
     * it (shared statements skip it and run those requests alone); the client's traffic is held for 100-150 ms, less
     * than the command timeout (twice a cycle: its requests pile up and leave together); every connection of the client
     * is reset mid-flight; the client is cut off for twice the lease. Once the workers stopped, the counts of what the clients' stores really
     * sent go to the counters above; the run fails unless some reset after a shared statement fired.
     */
    static Run.Nemesis sharedStatements(long everyMillis) {
        return context -> {
            PostgresTopology postgres = context.postgres();
            List<SharedStatementsLocker> clients = context.sharedLockers();
            if (clients.isEmpty()) {
                throw new IllegalStateException("No lock client with shared statements: the scenario would test nothing");
            }
            List<TcpProxy> proxies = context.workerProxies();
            List<String> accounts = context.setup.resources();
            String[] markers = {SHARED_ACQUIRE_MARKER, HAND_OFF_MARKER, SHARED_RELEASE_MARKER};
            String[] markerNames = {"shared acquire", "hand-off", "shared release"};
            Map<String, Integer> resetsByMarker = new HashMap<>();
            TcpProxy armed = null;
            String armedFor = null;
            int armedBefore = 0;
            ThreadLocalRandom random = ThreadLocalRandom.current();
            for (int round = 0; context.timeLeft(); round++) {
                context.pace(everyMillis);
                if (armed != null && armed.resetsFired() > armedBefore) {
                    resetsByMarker.merge(armedFor, armed.resetsFired() - armedBefore, Integer::sum);
                    RESETS_AFTER_SHARED.addAndGet(armed.resetsFired() - armedBefore);
                }
                armed = null;
                TcpProxy proxy = proxies.get(random.nextInt(proxies.size()));
                int step = round % 8;
                long at = System.nanoTime();
                if (step < 3) {
                    armedBefore = proxy.resetsFired();
                    armed = proxy;
                    armedFor = markerNames[step];
                    proxy.resetAfterRequestContaining(markers[step], 1);
                    context.history.fault("reset after a " + markerNames[step], at, at);
                } else if (step == 3) {
                    String lockId = context.prefix + "{" + accounts.get(random.nextInt(accounts.size())) + "}";
                    try (PostgresTopology.RowHold hold = postgres.holdRowForKeyShare(lockId)) {
                        context.pace(50 + random.nextInt(101));
                    } catch (IllegalStateException noRowYet) {
                        // The account was never granted yet: nothing to hold this time.
                    }
                    context.history.fault("lease row held FOR KEY SHARE", at, System.nanoTime());
                } else if (step == 4 || step == 6) {
                    // A network stall shorter than the command timeout: the client's statements wait in the proxy, its
                    // new requests queue behind the statements in flight and leave together once it ends.
                    proxy.blackhole();
                    try {
                        context.pace(100 + random.nextInt(51));
                    } finally {
                        proxy.resume();
                    }
                    context.history.fault("shared client stalled briefly", at, System.nanoTime());
                } else if (step == 5) {
                    proxy.resetAll();
                    context.history.fault("every connection of a shared client reset", at, System.nanoTime());
                } else {
                    proxy.blackhole();
                    try {
                        // The fault's length, not synchronisation: longer than the lease.
                        context.pace(context.leaseTime().toMillis() * 2);
                    } finally {
                        proxy.resume();
                    }
                    context.history.fault("shared client partitioned", at, System.nanoTime());
                }
            }
            if (armed != null && armed.resetsFired() > armedBefore) {
                resetsByMarker.merge(armedFor, armed.resetsFired() - armedBefore, Integer::sum);
                RESETS_AFTER_SHARED.addAndGet(armed.resetsFired() - armedBefore);
            }
            if (resetsByMarker.isEmpty()) {
                throw new IllegalStateException("No connection was reset after a shared statement: the scenario's resets "
                        + "tested nothing");
            }
            LOG.info("P14: connections reset right after a shared statement was sent: {}", resetsByMarker);
            context.afterStop(() -> {
                StringBuilder counts = new StringBuilder();
                for (SharedStatementsLocker client : clients) {
                    StatementCounter c = client.counter();
                    SHARED_ACQUIRES.addAndGet(c.of(StatementCounter.Kind.SHARED_ACQUIRE).completedWithSeveral.get());
                    SHARED_ACQUIRE_LOCKS.addAndGet(c.of(StatementCounter.Kind.SHARED_ACQUIRE).members.get());
                    SHARED_RELEASES.addAndGet(c.of(StatementCounter.Kind.SHARED_RELEASE).completedWithSeveral.get());
                    SHARED_RELEASE_LOCKS.addAndGet(c.of(StatementCounter.Kind.SHARED_RELEASE).members.get());
                    HAND_OFFS.addAndGet(c.of(StatementCounter.Kind.HAND_OFF).rows.get());
                    int[] store = client.storeSharedStatements();
                    STORE_SHARED_ACQUIRES.addAndGet(store[0]);
                    STORE_SHARED_RELEASES.addAndGet(store[1]);
                    for (StatementCounter.Kind kind : StatementCounter.Kind.values()) {
                        SHARED_CLIENT_DEADLOCKS.addAndGet(c.of(kind).deadlocks.get());
                    }
                    counts.append(client.describeFaultsAndWaves()).append("; losses signalled more than 500 ms after the"
                            + " deadline or thaw: ").append(client.describeLateLosses(500)).append("\n  store's batchers: ")
                            .append(store[0]).append(" shared acquires, ").append(store[1])
                            .append(" shared releases; on the wire:").append(c.describe()).append('\n');
                }
                counts.append("resets right after a shared statement: ").append(resetsByMarker);
                sharedStatementCounts = counts.toString();
                LOG.info("P14 statements of the shared clients:\n{}", sharedStatementCounts);
            });
        };
    }
}
