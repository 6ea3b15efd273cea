package dev.fenced.torture;

import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.FencedLockClientBuilder;
import dev.fenced.testservices.TcpProxy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs one scenario in one arm: sets up the lock service ({@link RedisTopology} or {@link PostgresTopology}),
 * fresh tables, the workers and a deadline sampler, lets the {@link Nemesis} inject its faults until the run's
 * time is up, waits until the system made progress after the last fault healed, stops the workers, and hands
 * history and database to the {@link Checker}. Everything it starts is stopped again, also when something
 * fails, and at JVM exit.
 */
final class Run {

    private static final Logger LOG = LoggerFactory.getLogger(Run.class);

    /** Injects faults while the workers run, until {@link Context#timeLeft()} is false. */
    @FunctionalInterface
    interface Nemesis {
        void run(Context context) throws Exception;
    }

    /**
     * What one run is made of.
     *
     * @param service a new lock service for this run, closed by the run
     * @param r2dbcUrl the shared test database, where Redis runs keep their tables
     */
    record Setup(String scenario, Arm arm, Supplier<? extends LockService> service, String r2dbcUrl, int workers,
            List<String> resources, List<String> witnessResources, Worker.Profile profile, Duration duration,
            int lanesPerClient) {

        /**
         * @param lanesPerClient 1: each worker has a lock client of its own (every scenario but P14); more: the workers
         *     share lock clients on the PostgreSQL store with shared statements on ({@link SharedStatementsLocker}), this
         *     many to a client, so that one client has that many acquires and releases in flight at once
         */
        Setup {
            if (lanesPerClient < 1) {
                throw new IllegalArgumentException("lanesPerClient must be at least 1: " + lanesPerClient);
            }
        }

        /** Each worker with a lock client of its own. */
        Setup(String scenario, Arm arm, Supplier<? extends LockService> service, String r2dbcUrl, int workers,
                List<String> resources, List<String> witnessResources, Worker.Profile profile, Duration duration) {
            this(scenario, arm, service, r2dbcUrl, workers, resources, witnessResources, profile, duration, 1);
        }
    }

    /**
     * Locks of the run still held in the lock service once every client of the run was closed, so held by nobody:
     * how many, and the longest time one of them had left; plus the orphans a scenario found while its clients were
     * still open ({@code during}: a lock held by an unknown owner, a lease the client renews that nobody holds, see
     * {@link History#orphan}). {@code count} is -1 if the service could not be asked.
     */
    record Orphans(int count, long longestMillis, java.util.Map<String, LockService.Holder> locks, int during) {

        static final Orphans UNKNOWN = new Orphans(-1, 0, java.util.Map.of(), 0);

        static Orphans of(java.util.Map<String, LockService.Holder> held) {
            return new Orphans(held.size(), held.values().stream().mapToLong(LockService.Holder::remainingMillis).max().orElse(0),
                    java.util.Map.copyOf(held), 0);
        }

        /** These, and {@code found} orphans found during the run. */
        Orphans withDuring(int found) {
            return new Orphans(count, longestMillis, locks, during + found);
        }

        /** Every orphan: at the end and during the run; -1 if the service could not be asked at the end. */
        int total() {
            return count < 0 ? -1 : count + during;
        }

        /** For the report: {@code 0}, or the count and the longest time left (and how many were found during the run). */
        String describe() {
            if (count < 0) {
                return "unknown";
            }
            String atEnd = count == 0 ? "" : count + " at the end (" + longestMillis + " ms)";
            String found = during == 0 ? "" : during + " during the run";
            return count == 0 && during == 0 ? "0" : String.join(", ", java.util.stream.Stream.of(atEnd, found)
                    .filter(part -> !part.isEmpty()).toList());
        }
    }

    /** What one run found: the checker's verdict, and the locks it left held by nobody. */
    record Outcome(Checker.Result result, Orphans orphans) {
    }

    private Run() {
    }

    static Outcome execute(Setup setup, Nemesis nemesis) throws Exception {
        LOG.info("Scenario {} ({}) starts", setup.scenario(), setup.arm().label());
        List<AutoCloseable> resources = new ArrayList<>();
        Thread reaper = new Thread(() -> closeAll(resources), "torture-reaper");
        Runtime.getRuntime().addShutdownHook(reaper);
        List<Thread> threads = new ArrayList<>();
        java.util.concurrent.atomic.AtomicReference<Orphans> orphans = new java.util.concurrent.atomic.AtomicReference<>(Orphans.UNKNOWN);
        Checker.Result result;
        Context context = null;
        History history = new History();
        try {
            LockService service = setup.service().get();
            resources.add(service);
            List<String> all = new ArrayList<>(setup.resources());
            all.addAll(setup.witnessResources());
            String ledgerUrl = service.ledgerUrl(setup.r2dbcUrl());
            Ledger ledger = Ledger.create(ledgerUrl, all, service.writes());
            resources.add(() -> {
                try {
                    ledger.drop();
                } finally {
                    ledger.close();
                }
            });
            String prefix = "torture-" + UUID.randomUUID() + ":";
            // Resources close in reverse order: this runs after every client of the run is closed.
            resources.add(1, () -> service.removeRunState(prefix));
            // And this just before: what is still held then is held by nobody.
            resources.add(2, () -> orphans.set(Orphans.of(service.heldLocks(prefix))));
            Set<Grant> active = ConcurrentHashMap.newKeySet();
            context = new Context(setup, service, ledgerUrl, ledger, prefix, history, active, resources);
            if (setup.lanesPerClient() == 1) {
                for (int i = 1; i <= setup.workers(); i++) {
                    Worker worker = context.worker("w" + i, setup.resources());
                    threads.add(start("torture-worker-" + i, worker));
                }
            } else {
                int clients = (setup.workers() + setup.lanesPerClient() - 1) / setup.lanesPerClient();
                for (int c = 1; c <= clients; c++) {
                    int lanes = Math.min(setup.lanesPerClient(), setup.workers() - (c - 1) * setup.lanesPerClient());
                    List<Worker> workers = context.sharedClientWorkers("c" + c, lanes, setup.resources());
                    for (int l = 1; l <= workers.size(); l++) {
                        threads.add(start("torture-worker-c" + c + "-l" + l, workers.get(l - 1)));
                    }
                }
            }
            threads.add(start("torture-deadline-sampler", () -> {
                // Sampling, not synchronisation: renewals move a lease's deadline, and I5 needs the last one.
                while (!Thread.currentThread().isInterrupted()) {
                    active.forEach(Grant::sampleDeadline);
                    try {
                        TimeUnit.MILLISECONDS.sleep(5);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }));
            nemesis.run(context);
            context.awaitRecovery();
            context.stop();
            for (Thread thread : threads) {
                if (thread.getName().startsWith("torture-worker")) {
                    thread.join(TimeUnit.SECONDS.toMillis(60));
                    if (thread.isAlive()) {
                        throw new IllegalStateException(thread.getName() + " did not finish its operation within 60 s");
                    }
                }
            }
            context.afterStop();
            result = Checker.check(setup.scenario(), setup.arm(), setup.profile().leaseTime(), history,
                    ledger.balances(), ledger.auditRows(), setup.profile().lockSet() ? ledger.sets() : Map.of(),
                    setup.profile().mutex());
            LOG.info("Scenario {} ({}): {} operations, {} violations {}; acquire failures: {}", setup.scenario(),
                    setup.arm().label(), result.operations(), result.violations(), result.examples(),
                    history.acquireFailureReasons());
        } finally {
            if (context != null) {
                context.stop();
            }
            for (Thread thread : threads) {
                thread.interrupt();
            }
            for (Thread thread : threads) {
                thread.join(TimeUnit.SECONDS.toMillis(30));
            }
            closeAll(resources);
            try {
                Runtime.getRuntime().removeShutdownHook(reaper);
            } catch (IllegalStateException e) {
                // The JVM is exiting: the hook runs anyway.
            }
        }
        Orphans found = orphans.get().withDuring(history.orphans().size());
        LOG.info("Scenario {} ({}): locks held by nobody: {} {}", setup.scenario(), setup.arm().label(),
                found.describe(), found.locks());
        return new Outcome(result, found);
    }

    private static Thread start(String name, Runnable task) {
        Thread thread = new Thread(task, name);
        thread.setDaemon(true);
        thread.start();
        return thread;
    }

    /** Closes in reverse order of creation, each once, continuing past failures. */
    private static synchronized void closeAll(List<AutoCloseable> resources) {
        for (int i = resources.size() - 1; i >= 0; i--) {
            AutoCloseable resource = resources.remove(i);
            try {
                resource.close();
            } catch (Exception e) {
                LOG.warn("Could not close {}", resource, e);
            }
        }
    }

    /** What a nemesis can use and record. Used from the nemesis thread only, except {@link #isRunning()}. */
    static final class Context {

        final Setup setup;
        final LockService service;
        final String ledgerUrl;
        final Ledger ledger;
        final String prefix;
        final History history;
        private final Set<Grant> active;
        private final List<AutoCloseable> resources;
        private final List<TcpProxy> workerProxies = new ArrayList<>();
        private final List<SharedStatementsLocker> sharedLockers = new ArrayList<>();
        /** How late the proxy of a shared client relays each reply of the database. */
        private static final long SHARED_CLIENT_REPLY_DELAY_MILLIS = 10;
        private final List<Runnable> afterStop = new ArrayList<>();
        private final long endsAt;
        private volatile boolean running = true;

        Context(Setup setup, LockService service, String ledgerUrl, Ledger ledger, String prefix, History history,
                Set<Grant> active, List<AutoCloseable> resources) {
            this.setup = setup;
            this.service = service;
            this.ledgerUrl = ledgerUrl;
            this.ledger = ledger;
            this.prefix = prefix;
            this.history = history;
            this.active = active;
            this.resources = resources;
            this.endsAt = System.nanoTime() + setup.duration().toNanos();
        }

        Duration leaseTime() {
            return setup.profile().leaseTime();
        }

        /** The run's Redis, for the faults only Redis takes. */
        RedisTopology redis() {
            if (service instanceof RedisTopology redis) {
                return redis;
            }
            throw new IllegalStateException("This scenario needs Redis, but the run's locks are on " + service);
        }

        /** The run's Redis under libfaketime, for the clock faults. */
        FakeClockRedis fakeClock() {
            if (service instanceof FakeClockRedis redis) {
                return redis;
            }
            throw new IllegalStateException("This scenario steps the lock server's clock, but the run's locks are on " + service);
        }

        /** The run's PostgreSQL lease store, for the faults only it takes. */
        PostgresTopology postgres() {
            if (service instanceof PostgresTopology postgres) {
                return postgres;
            }
            throw new IllegalStateException("This scenario needs the PostgreSQL store, but the run's locks are on " + service);
        }

        boolean timeLeft() {
            return System.nanoTime() - endsAt < 0;
        }

        boolean isRunning() {
            return running;
        }

        /** A worker with a locker of its own, behind a proxy of its own, on {@code resources}. */
        Worker worker(String name, List<String> resources) {
            TcpProxy proxy = service.clientProxy();
            workerProxies.add(proxy);
            return new Worker(name, locker(name, proxy), ledger, setup.arm(), resources, history, setup.profile(),
                    this::isRunning, active);
        }

        /**
         * {@code lanes} workers named {@code client-l1}, {@code client-l2}, … sharing one lock client on the PostgreSQL
         * store with shared statements on, behind one proxy of its own; the client is closed with the run.
         */
        List<Worker> sharedClientWorkers(String client, int lanes, List<String> names) {
            TcpProxy proxy = service.clientProxy();
            workerProxies.add(proxy);
            // The database a network hop away: each statement takes a few ms more, so that the lanes' requests overlap,
            // as a service's many requests do on a real network.
            proxy.delayReplies(SHARED_CLIENT_REPLY_DELAY_MILLIS);
            if (!(service.endpoint(proxy) instanceof Locker.PostgresEndpoint endpoint)) {
                throw new IllegalStateException("Shared statements are the PostgreSQL store's, but the run's locks are on "
                        + service);
            }
            if (setup.arm() != Arm.FENCED) {
                throw new IllegalStateException("Shared statements run in the fenced arm only, not " + setup.arm().label());
            }
            // A connection a lane at most: the batchers hold 4 a kind, renewals, hand-offs and LISTEN one each. Releases
            // go in waves of half the lanes, so that more of them are in flight at once than the store sends alone.
            SharedStatementsLocker locker = new SharedStatementsLocker(endpoint, prefix, leaseTime(),
                    setup.profile().maxWait(), Math.max(4, lanes), client, Math.max(2, lanes / 2));
            resources.add(locker);
            sharedLockers.add(locker);
            List<Worker> workers = new ArrayList<>();
            for (int l = 1; l <= lanes; l++) {
                workers.add(new Worker(client + "-l" + l, locker, ledger, setup.arm(), names, history,
                        setup.profile(), this::isRunning, active));
            }
            return workers;
        }

        /** The shared lock clients of the run's workers ({@link Setup#lanesPerClient()} above 1), in order. */
        List<SharedStatementsLocker> sharedLockers() {
            return List.copyOf(sharedLockers);
        }

        /** The proxies of the workers started by the run (not of witnesses). */
        List<TcpProxy> workerProxies() {
            return List.copyOf(workerProxies);
        }

        /** A locker of this run's arm, behind a new proxy to the lock service; closed with the run. */
        Locker locker(String name) {
            return locker(name, service.clientProxy(), leaseTime());
        }

        /** As {@link #locker(String)}, with leases of {@code leaseTime} instead of the run's. */
        Locker locker(String name, Duration leaseTime) {
            return locker(name, service.clientProxy(), leaseTime);
        }

        private Locker locker(String name, TcpProxy proxy) {
            return locker(name, proxy, leaseTime());
        }

        private Locker locker(String name, TcpProxy proxy, Duration leaseTime) {
            Locker locker = Locker.create(setup.arm(), service.endpoint(proxy), prefix, leaseTime, setup.profile().maxWait(),
                    name);
            resources.add(locker);
            return locker;
        }

        /**
         * A client of the library with the run's key prefix, reaching the lock service through {@code proxy}, with
         * {@code settings} applied; closed with the run, and its connections after it.
         */
        FencedLockClient client(TcpProxy proxy, UnaryOperator<FencedLockClientBuilder> settings) {
            FencedLockClientBuilder builder = FencedLockClient.builder().keyPrefix(prefix);
            closeLater(service.endpoint(proxy).configure(builder));
            return closeLater(settings.apply(builder).build());
        }

        /** Samples the grant's deadline until {@link #untrack}, as the workers' grants are. */
        void track(Grant grant) {
            active.add(grant);
        }

        void untrack(Grant grant) {
            active.remove(grant);
        }

        /** Registers something to close with the run. */
        <T extends AutoCloseable> T closeLater(T resource) {
            resources.add(resource);
            return resource;
        }

        /** Registers a check to run once the workers stopped (all their leases released). */
        void afterStop(Runnable check) {
            afterStop.add(check);
        }

        /** Sleeps between faults: pacing, not synchronisation. */
        void pace(long millis) throws InterruptedException {
            TimeUnit.MILLISECONDS.sleep(millis);
        }

        /** Starts a daemon thread that ends with the run. */
        Thread background(String name, Runnable task) {
            Thread thread = new Thread(task, name);
            thread.setDaemon(true);
            thread.start();
            resources.add(() -> {
                thread.interrupt();
                thread.join(TimeUnit.SECONDS.toMillis(30));
            });
            return thread;
        }

        /** Waits until some acquire succeeded after the last fault healed, for at most I4's bound. */
        void awaitRecovery() throws InterruptedException {
            long lastHeal = history.faults().stream().mapToLong(History.Fault::healedAt).max().orElse(System.nanoTime());
            history.awaitAcquireAfter(lastHeal, leaseTime().plus(Checker.BACKOFF).toNanos());
        }

        void stop() {
            running = false;
        }

        void afterStop() {
            afterStop.forEach(Runnable::run);
        }
    }
}
