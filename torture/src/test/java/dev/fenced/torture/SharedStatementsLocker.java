package dev.fenced.torture;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.TokenScheme;
import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.lock.internal.LeaseStore;
import dev.fenced.lock.internal.LeasingLockClient;
import dev.fenced.lock.internal.postgres.SharingStores;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.postgresql.PostgresqlConnectionFactoryProvider;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactoryOptions;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * One lock client on the PostgreSQL store with shared statements on, used by several workers (lanes)
 * at once, so that its acquires and releases overlap and share multi-row statements, and a release with a waiting lane
 * of the same client is a one-statement hand-off. The switch is on for this client only: its store is built with
 * {@code batching} set ({@link SharingStores}), not through the JVM-wide system property. Its pool (through the
 * client's own proxy, no prepared statement cache, as every locker of the PostgreSQL arm) is wrapped by a
 * {@link StatementCounter}, which counts the statements the store really sent.
 *
 * <p>{@link #pause} freezes the client's one renewal thread, which serves every lane: a lane that pauses starts a freeze
 * (or joins the one in progress), and when it ends every lease of the client that still had a timer when it began is
 * marked thawed, since none of their timers could run before: the leases of lanes frozen with it, and those of lanes
 * that went on and released meanwhile (only the renewal thread is frozen, not the whole process). So as not to keep the
 * client frozen most of the time, a pause that comes within two leases of the end of the last freeze is the lane's
 * alone (its thread sleeps, renewals go on).
 *
 * <p>Releases go in waves: each waits until {@code waveSize} lanes' releases gathered, or {@link #WAVE_GATHER_MILLIS},
 * and they leave together, so that the client has more releases of different locks in flight than the store sends
 * alone, and they share statements. Thread-safe.
 */
final class SharedStatementsLocker implements Locker {

    /** How long the releases of a wave wait at most for more to gather. */
    static final long WAVE_GATHER_MILLIS = 30;
    /** A grant whose release was called this long ago is forgotten even if its loss never settled. */
    private static final long STALE_GRANT_NANOS = TimeUnit.SECONDS.toNanos(10);

    private final Scheduler renewals;
    private final ConnectionPool pool;
    private final StatementCounter counter = new StatementCounter();
    private final LeaseStore store;
    private final LeasingLockClient client;
    private final Duration maxWait;
    private final long cooldownNanos;
    private final Set<Grant> grants = ConcurrentHashMap.newKeySet();
    private final Object freezes = new Object();
    /** Guarded by {@link #freezes}: the thaw of the freeze in progress, or {@code null}. */
    private @Nullable CountDownLatch thaw;
    /** Guarded by {@link #freezes}. */
    private long lastThawAt = System.nanoTime() - TimeUnit.HOURS.toNanos(1);
    /** Freezes of the renewal thread, and grants whose release had been called, not settled, when one began. */
    private final AtomicInteger freezeCount = new AtomicInteger();
    private final AtomicInteger releasedDuringFreeze = new AtomicInteger();
    private final java.util.Queue<Remarked> remarked = new java.util.concurrent.ConcurrentLinkedQueue<>();
    private final java.util.Queue<Released> released = new java.util.concurrent.ConcurrentLinkedQueue<>();
    private final java.util.Map<String, AtomicInteger> acquiringLanes = new ConcurrentHashMap<>();
    private final int waveSize;
    private final Object wave = new Object();
    /** Guarded by {@link #wave}: releases gathered for the next wave, and the waves opened so far. */
    private int gathered;
    private long waves;
    private final AtomicInteger wavesOpened = new AtomicInteger();
    private final AtomicInteger releasesInWaves = new AtomicInteger();

    /**
     * @param waveSize how many lanes' releases gather before they go together ({@link #WAVE_GATHER_MILLIS} at most)
     */
    SharedStatementsLocker(Locker.PostgresEndpoint endpoint, String prefix, Duration leaseTime, Duration maxWait,
            int poolSize, String name, int waveSize) {
        this.maxWait = maxWait;
        this.waveSize = waveSize;
        this.cooldownNanos = leaseTime.multipliedBy(2).toNanos();
        this.renewals = Schedulers.newSingle("torture-renewal-" + name, true);
        ConnectionFactoryOptions options = ConnectionFactoryOptions.parse(endpoint.databaseUrl()).mutate()
                .option(ConnectionFactoryOptions.HOST, endpoint.host())
                .option(ConnectionFactoryOptions.PORT, endpoint.port())
                .option(PostgresqlConnectionFactoryProvider.PREPARED_STATEMENT_CACHE_QUERIES, 0)
                .build();
        this.pool = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(options))
                .initialSize(1).maxSize(poolSize).build());
        try {
            ClientSettings settings = ClientSettings.of(prefix, leaseTime, null, maxWait, null, renewals)
                    .withTokenScheme(TokenScheme.SERVER_TIME);
            this.store = SharingStores.open(counter.wrap(pool), endpoint.table(), settings, Locker.Fenced.label(name));
            this.client = LeasingLockClient.create(store, settings);
        } catch (RuntimeException e) {
            pool.disposeLater().onErrorResume(x -> Mono.empty()).block(Duration.ofSeconds(10));
            renewals.dispose();
            throw e;
        }
    }

    /** What the store really sent, counted on the wire side of the store. */
    StatementCounter counter() {
        return counter;
    }

    /** The store's own count of the multi-row statements its batchers started: {@code [acquires, releases]}. */
    int[] storeSharedStatements() {
        return SharingStores.sharedStatements(store);
    }

    @Override
    public Grant acquire(String resource) {
        FencedLease lease;
        AtomicInteger acquiring = acquiringLanes.computeIfAbsent(resource, r -> new AtomicInteger());
        acquiring.incrementAndGet();
        try {
            lease = client.acquire(resource).block(maxWait.plusSeconds(10));
        } catch (RuntimeException e) {
            throw new AcquireFailedException(resource, e);
        } finally {
            acquiring.decrementAndGet();
        }
        if (lease == null) {
            throw new AcquireFailedException(resource, new IllegalStateException("acquire completed empty"));
        }
        Grant[] self = new Grant[1];
        Grant grant = Grant.of(resource, lease, () -> {
            awaitWave();
            // Other lanes of this client acquiring the same lock now: with one waiting, the release is a hand-off.
            released.add(new Released(self[0], acquiring.get()));
            return lease.release().block(Ledger.STATEMENT_TIMEOUT);
        });
        self[0] = grant;
        if (grants.size() > 256) {
            synchronized (freezes) {
                if (thaw == null) {
                    // Between freezes only: a grant released during one must still be there when it ends.
                    long now = System.nanoTime();
                    grants.removeIf(g -> g.settledBefore(now) || g.releasedBefore(now - STALE_GRANT_NANOS));
                }
            }
        }
        grants.add(grant);
        return grant;
    }

    /**
     * Waits until {@link #waveSize} releases of the client's lanes are gathered, or {@link #WAVE_GATHER_MILLIS} passed,
     * and lets them go together: so that a client often has many releases of different locks in flight at once, as a
     * service that finishes a batch of requests has, and they share statements (the store sends up to 4 at once alone,
     * the rest wait for one of those and leave in one statement). Not a fault: the lease is held a little longer.
     */
    private void awaitWave() {
        synchronized (wave) {
            long mine = waves;
            if (++gathered >= waveSize) {
                openWave();
                return;
            }
            long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(WAVE_GATHER_MILLIS);
            while (waves == mine) {
                long left = until - System.nanoTime();
                if (left <= 0) {
                    openWave();
                    return;
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(wave, left);
                } catch (InterruptedException e) {
                    // The run is stopping: release now, and keep the interrupt for the lane's loop.
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }
    }

    /** Guarded by {@link #wave}. */
    private void openWave() {
        if (gathered > 1) {
            wavesOpened.incrementAndGet();
            releasesInWaves.addAndGet(gathered);
        }
        gathered = 0;
        waves++;
        wave.notifyAll();
    }

    /** For the log: freezes, grants released during one, waves of releases and the releases they carried. */
    String describeFaultsAndWaves() {
        // I5's measure of the grants released before a thaw, had they not been marked thawed (as the first version of
        // this class did: it forgot released grants before marking): from the deadline, or an earlier thaw.
        long worstUnmarked = Long.MIN_VALUE;
        long worstMarked = Long.MIN_VALUE;
        int overUnmarked = 0;
        String worst = "";
        for (Remarked r : remarked) {
            long lost = r.grant().lostAt();
            if (lost == 0) {
                continue;
            }
            long deadline = r.grant().lastDeadline();
            long unmarked = lost - (r.thawedBefore() != 0 && r.thawedBefore() - deadline > 0 ? r.thawedBefore() : deadline);
            long marked = lost - (r.grant().thawedAt() - deadline > 0 ? r.grant().thawedAt() : deadline);
            if (unmarked > Checker.LOSS_SIGNAL_BOUND.toNanos()) {
                overUnmarked++;
            }
            if (unmarked > worstUnmarked) {
                worstUnmarked = unmarked;
                worst = r.grant().resource() + " token " + r.grant().token() + ": loss " + unmarked / 1_000_000
                        + " ms after the deadline or an earlier thaw, " + marked / 1_000_000 + " ms after this thaw ("
                        + (r.grant().thawedAt() - deadline) / 1_000_000 + " ms after the deadline)";
            }
            worstMarked = Math.max(worstMarked, marked);
        }
        return freezeCount.get() + " freezes of the renewal thread (" + releasedDuringFreeze.get()
                + " grants released before a thaw whose lease had not settled when the freeze began; of those with a"
                + " loss signal, measured from their deadline or an earlier thaw " + overUnmarked + " over I5's bound"
                + (worst.isEmpty() ? "" : ", the latest " + worst) + (worstMarked == Long.MIN_VALUE ? ""
                        : "; measured from the thaw the latest " + worstMarked / 1_000_000 + " ms")
                + "), " + wavesOpened.get() + " waves of releases of several lanes (" + releasesInWaves.get()
                + " releases)";
    }

    /**
     * For the log: the grants whose loss signal came more than {@code overMillis} after their deadline (or the thaw
     * that marked them), with how many other lanes of this client were acquiring the same lock when it was released
     * (with one waiting, the release was a one-statement hand-off).
     */
    String describeLateLosses(long overMillis) {
        StringBuilder s = new StringBuilder();
        for (Released r : released) {
            Grant g = r.grant();
            long lost = g.lostAt();
            if (lost == 0) {
                continue;
            }
            long from = g.thawedAt() - g.lastDeadline() > 0 ? g.thawedAt() : g.lastDeadline();
            long late = (lost - from) / 1_000_000;
            if (late > overMillis) {
                s.append("\n  ").append(g.resource()).append(" token ").append(g.token()).append(": loss ").append(late)
                        .append(" ms after the deadline or thaw, ").append(r.acquiringLanes())
                        .append(" other lane(s) of the client acquiring it when it was released");
            }
        }
        return s.length() == 0 ? "none" : s.toString();
    }

    /** A grant whose release was called, and how many other lanes of the client were acquiring its lock then. */
    private record Released(Grant grant, int acquiringLanes) {
    }

    /** A grant released before a thaw that marked it, and its thaw mark before (0 if none). */
    private record Remarked(Grant grant, long thawedBefore) {
    }

    @Override
    public void pause(long millis) throws InterruptedException {
        CountDownLatch thawed;
        boolean start = false;
        synchronized (freezes) {
            if (thaw != null) {
                thawed = thaw;
            } else if (System.nanoTime() - lastThawAt < cooldownNanos) {
                thawed = null;
            } else {
                thawed = new CountDownLatch(1);
                thaw = thawed;
                start = true;
            }
        }
        if (thawed == null) {
            // The lane's thread alone stalls; the client's renewals go on.
            TimeUnit.MILLISECONDS.sleep(millis);
            return;
        }
        if (start) {
            CountDownLatch frozen = new CountDownLatch(1);
            CountDownLatch done = thawed;
            renewals.schedule(() -> {
                long frozenAt = System.nanoTime();
                freezeCount.incrementAndGet();
                frozen.countDown();
                try {
                    // The fault itself: the client's renewal thread stops, as in a stop-the-world pause.
                    TimeUnit.MILLISECONDS.sleep(millis);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                } finally {
                    // Every lease that still had a timer when the thread stopped could signal its loss only from now
                    // on: those of lanes that went on meanwhile and released (the release of a lease past its
                    // deadline fails over to a timer on this thread) as well as those of the frozen lanes. The other
                    // lanes are not frozen with it, unlike a stop-the-world pause, so some do release meanwhile.
                    for (Grant g : grants) {
                        if (!g.settledBefore(frozenAt)) {
                            if (g.isReleased()) {
                                releasedDuringFreeze.incrementAndGet();
                                remarked.add(new Remarked(g, g.thawedAt()));
                            }
                            g.thawed();
                        }
                    }
                    long now = System.nanoTime();
                    grants.removeIf(g -> g.settledBefore(now));
                    synchronized (freezes) {
                        thaw = null;
                        lastThawAt = System.nanoTime();
                    }
                    done.countDown();
                }
            });
            frozen.await();
        }
        thawed.await();
    }

    @Override
    public void close() {
        try {
            client.close();
        } finally {
            try {
                pool.disposeLater().onErrorResume(e -> Mono.empty()).block(Duration.ofSeconds(10));
            } finally {
                renewals.dispose();
            }
        }
    }
}
