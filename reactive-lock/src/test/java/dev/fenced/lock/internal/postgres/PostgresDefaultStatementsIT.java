package dev.fenced.lock.internal.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.LockServiceException;
import dev.fenced.lock.PostgresLeaseTable;
import dev.fenced.lock.ReleaseOutcome;
import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.lock.internal.LeaseStore.AcquireReply;
import dev.fenced.lock.internal.LeaseStore.Handoff;
import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import dev.fenced.testservices.TcpProxy;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.postgresql.PostgresqlConnectionConfiguration;
import io.r2dbc.postgresql.PostgresqlConnectionFactory;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.R2dbcException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The PostgreSQL store as it opens by default ({@link PostgresLeaseStore#BATCHING_PROPERTY} unset: acquires and
 * releases in flight at once share statements, a hand-off is one statement) and with the sharing switched off (one
 * statement per acquire and per release, a hand-off in two steps), under a write transaction's lease check
 * (r2dbc-fencing's {@code LeaseCheck}: {@code FOR KEY SHARE} on the row until the transaction ends). These are the
 * reviews' findings against shared statements, each asserted on both paths. Every store here is opened by the
 * property-reading {@code open}, the one {@code FencedLockClient} uses, with the property unset, except in the tests
 * named {@code switchedOff…}, which open it with the sharing off.
 */
@ExtendWith(PostgresServerExtension.class)
class PostgresDefaultStatementsIT {

    private static final String TABLE = "fenced_default_statements";
    private static final Duration WAIT = Duration.ofSeconds(40);

    private ConnectionPool pool;
    /** The pool's connections as the stores of these tests take them: through a gate the tests can close. */
    private GatedConnections gate;
    private PostgresServer server;
    private String prefix;

    @BeforeEach
    void connect(PostgresServer postgres) {
        this.server = postgres;
        System.clearProperty(PostgresLeaseStore.BATCHING_PROPERTY);
        pool = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(postgres.r2dbcUrl()))
                .maxSize(60).build());
        gate = new GatedConnections(pool);
        PostgresLeaseTable.named(TABLE).create(pool).block(WAIT);
        prefix = "def-" + UUID.randomUUID() + ":";
    }

    @AfterEach
    void close() {
        pool.disposeLater().block(WAIT);
    }

    /** Unset, the property leaves acquires and releases in flight at once sharing statements. */
    @Test
    void statementsAreSharedByDefault() {
        assertThat(sharedStatementsOf40Pairs()).as("shared acquire and release statements").allMatch(n -> n > 0);
    }

    /** Set to {@code false}, the property turns the sharing off: no shared statements. */
    @Test
    void switchedOffStatementsAreNotShared() {
        System.setProperty(PostgresLeaseStore.BATCHING_PROPERTY, "false");
        try {
            assertThat(sharedStatementsOf40Pairs()).as("shared acquire and release statements").containsOnly(0);
        } finally {
            System.clearProperty(PostgresLeaseStore.BATCHING_PROPERTY);
        }
    }

    /** 40 acquires at once, then 40 releases, on a store opened by the property-reading factory; its shared statements. */
    private List<Integer> sharedStatementsOf40Pairs() {
        ClientSettings settings = settings(Duration.ofSeconds(5));
        PostgresLeaseStore store = PostgresLeaseStore.open(pool, TABLE, settings, null);
        try {
            List<String> names = new ArrayList<>();
            for (int i = 0; i < 40; i++) {
                names.add("n-" + i);
            }
            List<AcquireReply> replies = Flux.fromIterable(names).flatMapSequential(n -> store.acquire(n, "o", 60_000, 0), 64)
                    .collectList().block(WAIT);
            assertThat(replies).allMatch(AcquireReply::acquired);
            Flux.fromIterable(names).flatMap(n -> store.release(n, "o", null), 64).blockLast(WAIT);
            return java.util.Arrays.stream(store.sharedStatements()).boxed().toList();
        } finally {
            store.close().block(WAIT);
            settings.scheduler().dispose();
        }
    }

    /**
     * Review finding 1: a lease released inside its own write transaction (withLease in a {@code @Transactional}
     * method) while a waiter of the same client waits. The release does not wait for the transaction's lease check
     * and says RELEASED; the waiter gets the lock, with a higher token, once the transaction ends.
     */
    @Test
    void aReleaseInsideItsWriteTransactionWithALocalWaiterIsReleased() throws Exception {
        releaseInsideItsWriteTransactionWithALocalWaiter();
    }

    /** Review finding 1 with the sharing off: the release, in two steps, does not wait for the lease check either. */
    @Test
    void switchedOffAReleaseInsideItsWriteTransactionWithALocalWaiterIsReleased() throws Exception {
        System.setProperty(PostgresLeaseStore.BATCHING_PROPERTY, "false");
        try {
            releaseInsideItsWriteTransactionWithALocalWaiter();
        } finally {
            System.clearProperty(PostgresLeaseStore.BATCHING_PROPERTY);
        }
    }

    private void releaseInsideItsWriteTransactionWithALocalWaiter() throws Exception {
        try (FencedLockClient client = FencedLockClient.builder().postgres(pool, PostgresLeaseTable.named(TABLE))
                .keyPrefix(prefix).commandTimeout(Duration.ofSeconds(2)).leaseTime(Duration.ofSeconds(30))
                .maxWait(Duration.ofSeconds(60)).build()) {
            String name = "tx-" + UUID.randomUUID();
            FencedLease lease = client.acquire(name).block(WAIT);
            CompletableFuture<FencedLease> waiter = client.acquire(name).toFuture();
            Thread.sleep(2000); // the waiter's first acquire has answered busy and it listens
            inTransaction(tx -> {
                leaseCheck(tx, name, lease.ownerId(), lease.token()).block(WAIT);
                Object outcome = lease.release().map(Object.class::cast).onErrorResume(e -> Mono.just(e)).block(WAIT);
                Mono.from(tx.commitTransaction()).block(WAIT);
                assertThat(outcome).as("release inside its write transaction").isEqualTo(ReleaseOutcome.RELEASED);
                FencedLease next = waiter.get(WAIT.toSeconds(), TimeUnit.SECONDS);
                assertThat(next.token()).isGreaterThan(lease.token());
                next.release().block(WAIT);
            });
        }
    }

    /**
     * Review finding 1, at the store: a hand-off while the releasing lease's lease check is open releases (the
     * release is a no-key update, which does not wait for {@code FOR KEY SHARE}); only the next owner's acquire
     * waits, and the lock is left to nobody rather than to the releasing lease. By default the one-statement hand-off
     * skips the locked row and takes the two steps.
     */
    @Test
    void aHandOffWhileTheReleasingLeasesWriteTransactionIsOpenReleases() throws Exception {
        handOffWhileTheReleasingLeasesWriteTransactionIsOpen(true);
    }

    /** The same with the sharing off: the hand-off is the two steps. */
    @Test
    void switchedOffAHandOffWhileTheReleasingLeasesWriteTransactionIsOpenReleases() throws Exception {
        handOffWhileTheReleasingLeasesWriteTransactionIsOpen(false);
    }

    private void handOffWhileTheReleasingLeasesWriteTransactionIsOpen(boolean shared) throws Exception {
        withStore(Duration.ofSeconds(2), shared, store -> {
            String name = "ho-" + UUID.randomUUID();
            long token = store.acquire(name, "a", 60_000, 0).block(WAIT).token();
            inTransaction(tx -> {
                leaseCheck(tx, name, "a", token).block(WAIT);
                Object outcome = store.handOff(name, "a", token, "b", 60_000, 0).map(Object.class::cast)
                        .onErrorResume(e -> Mono.just(e)).block(WAIT);
                String owner = ownerOf(name);
                Mono.from(tx.commitTransaction()).block(WAIT);
                assertThat(outcome).as("hand-off outcome").isInstanceOf(Handoff.class);
                assertThat(((Handoff) outcome).released()).as("released").isTrue();
                assertThat(owner).as("owner after the hand-off").isNotEqualTo("a");
            });
        });
    }

    /**
     * Review finding 2: acquires of free locks made at the same time as an acquire of a lock whose row a write
     * transaction holds (its lease check), all queued together, are each granted: none waits for the other lock's
     * transaction. By default the shared statement skips the locked row, which runs again alone.
     */
    @Test
    void freeLocksAreGrantedWhileAnotherLocksWriteTransactionIsOpen() throws Exception {
        freeLocksWhileAnotherLocksWriteTransactionIsOpen(true);
    }

    /** The same with the sharing off: each acquire is a statement of its own. */
    @Test
    void switchedOffFreeLocksAreGrantedWhileAnotherLocksWriteTransactionIsOpen() throws Exception {
        freeLocksWhileAnotherLocksWriteTransactionIsOpen(false);
    }

    private void freeLocksWhileAnotherLocksWriteTransactionIsOpen(boolean shared) throws Exception {
        withStore(Duration.ofSeconds(3), shared, store -> {
            String held = "held-" + UUID.randomUUID();
            long token = store.acquire(held, "holder", 60_000, 0).block(WAIT).token();
            List<String> names = new ArrayList<>();
            for (int i = 0; i < 39; i++) {
                String name = "free-" + i + "-" + UUID.randomUUID();
                store.acquire(name, "x", 60_000, 0).then(store.release(name, "x", null)).block(WAIT);
                names.add(name);
            }
            names.add(20, held);
            inTransaction(tx -> {
                leaseCheck(tx, held, "holder", token).block(WAIT);
                List<AcquireReply> got = whileSlotsWait(store, () -> Flux.fromIterable(names)
                        .flatMapSequential(n -> store.acquire(n, "me", 60_000, 0)
                                .onErrorResume(LockServiceException.class, e -> Mono.just(AcquireReply.busy(-2))), 64)
                        .collectList())
                        .get(WAIT.toSeconds(), TimeUnit.SECONDS);
                Mono.from(tx.commitTransaction()).block(WAIT);
                for (int i = 0; i < names.size(); i++) {
                    assertThat(got.get(i).acquired()).as(names.get(i)).isEqualTo(i != 20);
                }
            });
        });
    }

    /**
     * Acquires of locks whose rows write transactions hold (their lease checks), as many as there are statement slots,
     * wait for those transactions: an acquire of a free lock made meanwhile is granted at once. With shared statements,
     * four such acquires used to take every slot, each alone in the one-row statement, and every other acquire of
     * the client queued behind them until a transaction ended or the command timeout; now a statement in a slot never
     * waits for a row, and those acquires wait outside the slots.
     */
    @Test
    void anAcquireIsNotHeldUpByAcquiresWaitingForWriteTransactions() throws Exception {
        acquireNotHeldUpByAcquiresWaitingForWriteTransactions(true);
    }

    /** The same with the sharing off: each acquire is a statement of its own. */
    @Test
    void switchedOffAnAcquireIsNotHeldUpByAcquiresWaitingForWriteTransactions() throws Exception {
        acquireNotHeldUpByAcquiresWaitingForWriteTransactions(false);
    }

    private void acquireNotHeldUpByAcquiresWaitingForWriteTransactions(boolean shared) throws Exception {
        withStore(Duration.ofSeconds(30), shared, store -> inTransaction(tx -> {
            List<CompletableFuture<AcquireReply>> waiting = new ArrayList<>();
            for (int i = 0; i < StatementBatcher.MAX_ALONE; i++) {
                String name = "checked-" + i + "-" + UUID.randomUUID();
                long token = store.acquire(name, "holder", 60_000, 0).block(WAIT).token();
                leaseCheck(tx, name, "holder", token).block(WAIT);
                waiting.add(store.acquire(name, "waiter", 60_000, 0).toFuture());
                awaitLockWait("ON CONFLICT", i + 1);
            }
            AcquireReply free = store.acquire("free-" + UUID.randomUUID(), "waiter", 60_000, 0).block(WAIT);
            assertThat(free.acquired()).as("a free lock, while the acquires of checked locks wait").isTrue();
            assertThat(waiting).as("acquires of checked locks, while their transaction is open").noneMatch(CompletableFuture::isDone);
            Mono.from(tx.commitTransaction()).block(WAIT);
            for (CompletableFuture<AcquireReply> reply : waiting) {
                assertThat(reply.get(WAIT.toSeconds(), TimeUnit.SECONDS).acquired()).as("held by its holder").isFalse();
            }
        }));
    }

    /**
     * Review finding (helper-8): a lease released inside its still-open write transaction (its lease check holds the
     * row) while four acquires of the waiting client already wait for rows of their own. The waiter, woken by the
     * release's notification, was answered busy at once with no time known (crowded), slept a third of its lease
     * time, and nothing woke it when the transaction committed: it timed out. Now the crowded busy answer tells it
     * to try again shortly, and it gets the lock within its maximum wait (8 s, below a third of the 30 s lease).
     */
    @Test
    void aWaiterOfALockReleasedInsideItsWriteTransactionGetsItOnceTheTransactionEnds() throws Exception {
        waiterOfALockReleasedInsideItsWriteTransaction(true);
    }

    /** The same with the sharing off: the waiter's acquire waits for the transaction. */
    @Test
    void switchedOffAWaiterOfALockReleasedInsideItsWriteTransactionGetsItOnceTheTransactionEnds() throws Exception {
        waiterOfALockReleasedInsideItsWriteTransaction(false);
    }

    private void waiterOfALockReleasedInsideItsWriteTransaction(boolean shared) throws Exception {
        if (!shared) {
            System.setProperty(PostgresLeaseStore.BATCHING_PROPERTY, "false");
        }
        Connection checks = Mono.from(pool.create()).block(WAIT);
        Connection write = Mono.from(pool.create()).block(WAIT);
        try (FencedLockClient holder = waitingClient(); FencedLockClient waiter = waitingClient()) {
            Mono.from(checks.beginTransaction()).block(WAIT);
            List<String> checked = new ArrayList<>();
            // Kept reachable: a lease whose FencedLease the garbage collector takes is released.
            List<FencedLease> held = new ArrayList<>();
            for (int i = 0; i < StatementBatcher.MAX_ALONE; i++) {
                String name = "checked-" + i + "-" + UUID.randomUUID();
                FencedLease lease = holder.acquire(name).block(WAIT);
                leaseCheck(checks, name, lease.ownerId(), lease.token()).block(WAIT);
                checked.add(name);
                held.add(lease);
            }
            String name = "released-" + UUID.randomUUID();
            FencedLease lease = holder.acquire(name).block(WAIT);
            Mono.from(write.beginTransaction()).block(WAIT);
            leaseCheck(write, name, lease.ownerId(), lease.token()).block(WAIT);
            assertThat(lease.release().block(WAIT)).isEqualTo(ReleaseOutcome.RELEASED);
            List<CompletableFuture<FencedLease>> tries = new ArrayList<>();
            for (String other : checked) {
                tries.add(waiter.tryAcquire(other).toFuture());
            }
            awaitLockWait("ON CONFLICT", StatementBatcher.MAX_ALONE);
            CompletableFuture<FencedLease> wanted = waiter.acquire(name).toFuture();
            Thread.sleep(300); // the waiter's first attempts meet the row still locked
            Mono.from(write.commitTransaction()).block(WAIT);
            Object outcome = Mono.fromFuture(wanted).map(Object.class::cast).onErrorResume(e -> Mono.just(e)).block(WAIT);
            assertThat(outcome).as("the waiter, once the write transaction has ended").isInstanceOf(FencedLease.class);
            ((FencedLease) outcome).release().block(WAIT);
            Mono.from(checks.commitTransaction()).block(WAIT);
            for (CompletableFuture<FencedLease> attempt : tries) {
                assertThat(attempt.get(WAIT.toSeconds(), TimeUnit.SECONDS)).as("a checked lock, held by its holder").isNull();
            }
            assertThat(held).allMatch(FencedLease::isHeld);
        } finally {
            System.clearProperty(PostgresLeaseStore.BATCHING_PROPERTY);
            Mono.from(write.close()).block(WAIT);
            Mono.from(checks.close()).block(WAIT);
        }
    }

    /**
     * A client on the table: lease 30 s, maximum wait 8 s, command timeout 10 s (longer than the wait: the acquires
     * that wait for checked rows are still waiting when the test ends the checking transaction).
     */
    private FencedLockClient waitingClient() {
        return FencedLockClient.builder().postgres(pool, PostgresLeaseTable.named(TABLE)).keyPrefix(prefix)
                .commandTimeout(Duration.ofSeconds(10)).leaseTime(Duration.ofSeconds(30)).maxWait(Duration.ofSeconds(8)).build();
    }

    /**
     * Review finding 3: a write transaction that checks two leases (B, then A) while acquires of A and B wait (a
     * head waiter of each, say) is not made a deadlock victim, as LeaseCheck's javadoc promises. By default the
     * shared statement locks A and skips B, so no cycle can close.
     */
    @Test
    void aWriteTransactionCheckingTwoLeasesDoesNotDeadlockWithAcquires() throws Exception {
        writeTransactionCheckingTwoLeasesWhileAcquiresWait(true);
    }

    /** The same with the sharing off: each acquire is a statement of its own. */
    @Test
    void switchedOffAWriteTransactionCheckingTwoLeasesDoesNotDeadlockWithAcquires() throws Exception {
        writeTransactionCheckingTwoLeasesWhileAcquiresWait(false);
    }

    private void writeTransactionCheckingTwoLeasesWhileAcquiresWait(boolean shared) throws Exception {
        withStore(Duration.ofSeconds(30), shared, store -> {
            String a = "a-" + UUID.randomUUID();
            String b = "b-" + UUID.randomUUID();
            long ta = store.acquire(a, "holder-a", 60_000, 0).block(WAIT).token();
            long tb = store.acquire(b, "holder-b", 60_000, 0).block(WAIT).token();
            inTransaction(tx -> {
                leaseCheck(tx, b, "holder-b", tb).block(WAIT);
                CompletableFuture<List<AcquireReply>> waiters = whileSlotsWait(store,
                        () -> Flux.just(a, b).flatMapSequential(n -> store.acquire(n, "waiter", 60_000, 0)).collectList());
                awaitLockWait("ON CONFLICT", 1);
                Thread.sleep(1500); // past deadlock_timeout (1 s): a waiting statement's deadlock check has run
                String outcome = leaseCheck(tx, a, "holder-a", ta).thenReturn("checked")
                        .onErrorResume(R2dbcException.class, e -> Mono.just("[" + e.getSqlState() + "] " + e.getMessage()))
                        .block(WAIT);
                Mono.from(tx.rollbackTransaction()).onErrorResume(e -> Mono.empty()).block(WAIT);
                assertThat(outcome).as("the second lease check of the write transaction").isEqualTo("checked");
                assertThat(waiters.get(WAIT.toSeconds(), TimeUnit.SECONDS)).noneMatch(AcquireReply::acquired);
            });
        });
    }

    /**
     * Review finding 5: a release is never queued behind releases that wait for their rows: it runs at once and
     * answers while they still wait.
     */
    @Test
    void aReleaseDoesNotQueueBehindWaitingReleases() throws Exception {
        withStore(Duration.ofSeconds(30), true, store -> {
            List<String> names = new ArrayList<>();
            for (int i = 0; i < StatementBatcher.MAX_IN_FLIGHT + 1; i++) {
                String name = "rel-" + i + "-" + UUID.randomUUID();
                store.acquire(name, "o", 60_000, 0).block(WAIT);
                names.add(name);
            }
            inTransaction(tx -> {
                lockRows(tx, names.subList(0, StatementBatcher.MAX_IN_FLIGHT));
                List<CompletableFuture<Boolean>> waiting = new ArrayList<>();
                for (int i = 0; i < StatementBatcher.MAX_IN_FLIGHT; i++) {
                    waiting.add(store.release(names.get(i), "o", null).toFuture());
                }
                awaitLockWait(TABLE, StatementBatcher.MAX_IN_FLIGHT);
                Boolean last = store.release(names.get(StatementBatcher.MAX_IN_FLIGHT), "o", null).block(WAIT);
                assertThat(last).as("the fifth release").isTrue();
                assertThat(waiting).as("releases waiting for their rows").noneMatch(CompletableFuture::isDone);
                Mono.from(tx.rollbackTransaction()).block(WAIT);
                for (CompletableFuture<Boolean> f : waiting) {
                    assertThat(f.get(WAIT.toSeconds(), TimeUnit.SECONDS)).isTrue();
                }
            });
        });
    }

    /**
     * An acquire that commits in the database while its connection is reset before the reply fails typed and is
     * undone by owner: no lock is left held after the undo window.
     */
    @Test
    void anAcquireResetAfterItCommittedLeavesNoLockHeld() throws Exception {
        TcpProxy proxy = TcpProxy.start(server.host(), server.port());
        PostgresqlConnectionConfiguration.Builder config = PostgresqlConnectionConfiguration.builder()
                .host(proxy.host()).port(proxy.port()).database(server.database()).username(server.username());
        if (!server.password().isEmpty()) {
            config.password(server.password());
        }
        ConnectionPool proxied = new ConnectionPool(ConnectionPoolConfiguration.builder(
                new PostgresqlConnectionFactory(config.build())).initialSize(8).maxSize(8).build());
        try (FencedLockClient client = FencedLockClient.builder().postgres(proxied, PostgresLeaseTable.named(TABLE))
                .keyPrefix(prefix).commandTimeout(Duration.ofSeconds(2)).leaseTime(Duration.ofSeconds(60)).build()) {
            proxied.warmup().block(WAIT);
            List<String> names = new ArrayList<>();
            for (int i = 0; i < 24; i++) {
                names.add("reset-" + i + "-" + UUID.randomUUID());
            }
            proxy.resetAfterRequestContaining("ON CONFLICT", 1);
            List<Object> outcomes = Flux.fromIterable(names)
                    .flatMapSequential(n -> client.acquire(n).map(Object.class::cast).onErrorResume(e -> Mono.just(e)), 64)
                    .collectList().block(WAIT);
            int failed = 0;
            for (Object o : outcomes) {
                if (o instanceof FencedLease lease) {
                    lease.release().onErrorResume(e -> Mono.empty()).block(WAIT);
                } else {
                    failed++;
                    assertThat(o).isInstanceOf(LockServiceException.class);
                }
            }
            assertThat(proxy.resetsFired()).isEqualTo(1);
            assertThat(failed).isGreaterThanOrEqualTo(1);
            Thread.sleep(5000); // past the undo window (command timeout + 1 s)
            List<String> held = new ArrayList<>();
            for (String n : names) {
                String owner = ownerOf(n);
                if (owner != null) {
                    held.add(n + "=" + owner);
                }
            }
            assertThat(held).as("locks still held after the undo window").isEmpty();
        } finally {
            proxied.disposeLater().block(WAIT);
            proxy.close();
        }
    }

    /**
     * Shared statements (review findings 3, 4 and 6): a shared statement of A, B and 30 free locks
     * while a write transaction holds B's lease check and then checks A. Before {@code SKIP LOCKED} the statement
     * waited for B, the cycle closed, the statement was the deadlock victim (40P01) and reran every member alone at
     * once (12 connections); now it skips B (which runs again alone, outside the slots), so never more than
     * {@link StatementBatcher#MAX_IN_FLIGHT} statements run in the slots at once and each free lock is granted.
     */
    @Test
    void aStatementMeetingTwoLeaseChecksKeepsToTheSlots() throws Exception {
        withStore(Duration.ofSeconds(30), true, store -> {
            String a = "a-" + UUID.randomUUID();
            String b = "b-" + UUID.randomUUID();
            long ta = store.acquire(a, "holder-a", 60_000, 0).block(WAIT).token();
            long tb = store.acquire(b, "holder-b", 60_000, 0).block(WAIT).token();
            List<String> names = new ArrayList<>(List.of(a, b));
            for (int i = 0; i < 30; i++) {
                names.add("free-" + i + "-" + UUID.randomUUID());
            }
            inTransaction(tx -> {
                leaseCheck(tx, b, "holder-b", tb).block(WAIT);
                CompletableFuture<List<AcquireReply>> replies = whileSlotsWait(store,
                        () -> Flux.fromIterable(names).flatMapSequential(n -> store.acquire(n, "w", 60_000, 0), 64).collectList());
                awaitLockWait("ON CONFLICT", 1);
                leaseCheck(tx, a, "holder-a", ta).block(WAIT);
                Mono.from(tx.commitTransaction()).block(WAIT);
                List<AcquireReply> got = replies.get(WAIT.toSeconds(), TimeUnit.SECONDS);
                assertThat(store.sharedStatements()[0]).as("shared acquire statements").isPositive();
                // The slots, and outside them the lone request of whileSlotsWait and B's acquire alone, which waits.
                assertThat(gate.peak()).as("connections at once").isLessThanOrEqualTo(StatementBatcher.MAX_IN_FLIGHT + 2);
                for (int i = 0; i < names.size(); i++) {
                    assertThat(got.get(i).acquired()).as(names.get(i)).isEqualTo(i >= 2);
                }
            });
        });
    }

    // --- helpers ---

    /** A test of a store. */
    @FunctionalInterface
    private interface StoreTest {
        void run(PostgresLeaseStore store) throws Exception;
    }

    /** A test inside a transaction. */
    @FunctionalInterface
    private interface TransactionTest {
        void run(Connection tx) throws Exception;
    }

    /**
     * Runs {@code test} on a store on the gated pool, as it opens by default (sharing statements, the property unset)
     * or with the sharing off, with the given command timeout; closes the store and its scheduler after.
     */
    private void withStore(Duration commandTimeout, boolean shared, StoreTest test) throws Exception {
        ClientSettings settings = settings(commandTimeout);
        PostgresLeaseStore store = shared ? PostgresLeaseStore.open(gate, TABLE, settings, null)
                : PostgresLeaseStore.open(gate, TABLE, settings, null, false);
        try {
            test.run(store);
        } finally {
            store.close().block(WAIT);
            settings.scheduler().dispose();
        }
    }

    /**
     * Runs {@code test} with a connection of the pool (not through the gate) in a transaction begun on it; the test
     * commits or rolls back; the connection is closed after, which rolls back a transaction still open.
     */
    private void inTransaction(TransactionTest test) throws Exception {
        Connection tx = Mono.from(pool.create()).block(WAIT);
        try {
            Mono.from(tx.beginTransaction()).block(WAIT);
            test.run(tx);
        } finally {
            Mono.from(tx.close()).block(WAIT);
        }
    }

    private ClientSettings settings(Duration commandTimeout) {
        return ClientSettings.of(prefix, Duration.ofSeconds(60), null, Duration.ofSeconds(60), commandTimeout, null);
    }

    private String lockId(String name) {
        return prefix + "{" + name + "}";
    }

    /** The row's owner, or {@code null} (free, or no row). */
    private String ownerOf(String name) {
        return Flux.usingWhen(pool.create(), c -> Flux.from(c.createStatement("SELECT owner FROM " + TABLE
                                + " WHERE lock_id = $1 AND owner IS NOT NULL").bind(0, lockId(name)).execute())
                        .concatMap(r -> r.map((row, meta) -> row.get("owner", String.class))),
                Connection::close).next().block(WAIT);
    }

    /** The lease check of r2dbc-fencing's LeaseCheck (the same statement), in the caller's transaction. */
    private Mono<Void> leaseCheck(Connection tx, String name, String owner, long token) {
        return Flux.from(tx.createStatement("SELECT 1 FROM " + TABLE + " WHERE lock_id = $1 AND owner = $2 AND token = $3"
                                + " AND expires_at > clock_timestamp() FOR KEY SHARE")
                        .bind(0, lockId(name)).bind(1, owner).bind(2, token).execute())
                .concatMap(r -> r.map((row, meta) -> 1))
                .collectList()
                .flatMap(rows -> rows.size() == 1 ? Mono.<Void>empty() : Mono.error(new AssertionError("lease not held: " + name)));
    }

    private void lockRows(Connection tx, List<String> names) {
        Flux.from(tx.createStatement("SELECT lock_id FROM " + TABLE + " WHERE lock_id = ANY($1) FOR UPDATE")
                        .bind(0, names.stream().map(this::lockId).toArray(String[]::new)).execute())
                .concatMap(r -> r.map((row, meta) -> 1)).then().block(WAIT);
    }

    /**
     * Starts {@code requests} while a lone acquire and one acquire a statement slot wait for their connections at the
     * gate, and opens it 200 ms later: with shared statements (the default), the requests queue meanwhile and leave
     * together. The gate's peak counts from the opening.
     */
    private <T> CompletableFuture<T> whileSlotsWait(PostgresLeaseStore store, java.util.function.Supplier<Mono<T>> requests)
            throws Exception {
        try {
            gate.takeEverySlot(name -> store.acquire(name, "blocked", 60_000, 0), WAIT);
            CompletableFuture<T> result = requests.get().toFuture();
            Thread.sleep(200);
            gate.resetPeak();
            return result;
        } finally {
            gate.open();
        }
    }

    /** Waits until {@code n} statements on the table whose text contains {@code text} wait for a lock. */
    private void awaitLockWait(String text, int n) throws InterruptedException {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            Long waiting = Flux.usingWhen(pool.create(), c -> Flux.from(c.createStatement("SELECT count(*) FROM pg_stat_activity"
                                    + " WHERE wait_event_type = 'Lock' AND query LIKE '%" + text + "%' AND query LIKE '%" + TABLE + "%'"
                                    + " AND query NOT LIKE '%pg_stat_activity%'").execute())
                            .concatMap(r -> r.map((row, meta) -> row.get(0, Long.class))), Connection::close)
                    .blockLast(WAIT);
            if (waiting != null && waiting >= n) {
                return;
            }
            Thread.sleep(10);
        }
        throw new AssertionError(n + " statement(s) with " + text + " did not wait for a lock");
    }
}
