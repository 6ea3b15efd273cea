package dev.fenced.lock.internal.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.LockServiceException;
import dev.fenced.lock.PostgresLeaseTable;
import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.lock.internal.LeasingLockClient;
import dev.fenced.lock.internal.LeaseStore.AcquireReply;
import dev.fenced.lock.internal.LeaseStore.RenewRequest;
import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Acquires and releases in flight at once share statements: each keeps its own answer, a statement's failure is each
 * member's typed failure, a member given up mid-statement is undone, and tokens keep rising across both paths. A
 * statement is made to carry several requests deterministically: the store's connections come through a gate
 * ({@link GatedConnections}) that the test closes while a lone request and one statement a slot wait for their
 * connections, so that the requests under test queue up; opening it lets them leave in one statement.
 */
@ExtendWith(PostgresServerExtension.class)
class PostgresSharedStatementsIT {

    private static final String TABLE = "fenced_shared_it";
    private static final Duration WAIT = Duration.ofSeconds(20);

    /** A part of the text of the renewal statement, and of the shared release, that no other statement has. */
    private static final String RENEWAL = "AS r(lock_id, owner, token, ms, i)";
    private static final String SHARED_RELEASE = "AS r(lock_id, owner, token, i)";
    /** The same for the shared acquire. */
    private static final String SHARED_ACQUIRE = "AS r(lock_id, owner, ms, floor, i)";

    private ConnectionPool pool;
    private GatedConnections gate;
    private ClientSettings settings;
    private PostgresLeaseStore store;
    private String prefix;
    private String postgresUrl;

    @BeforeEach
    void connect(PostgresServer postgres) {
        postgresUrl = postgres.r2dbcUrl();
        pool = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(postgres.r2dbcUrl()))
                .maxSize(12).build());
        PostgresLeaseTable.named(TABLE).create(pool).block(WAIT);
        prefix = "sh-" + UUID.randomUUID() + ":";
        settings = ClientSettings.of(prefix, Duration.ofSeconds(30), null, Duration.ofSeconds(30), null, null);
        gate = new GatedConnections(pool);
        store = PostgresLeaseStore.open(gate, TABLE, settings, null, true);
    }

    @AfterEach
    void close() {
        store.close().block(WAIT);
        settings.scheduler().dispose();
        pool.disposeLater().block(WAIT);
    }

    @Test
    void aStatementInWhichOneLockIsHeldGrantsTheOthers() {
        String held = "held-" + UUID.randomUUID();
        assertThat(store.acquire(held, "someone-else", 60_000, 0).block(WAIT).acquired()).isTrue();
        List<String> names = new ArrayList<>(List.of(held));
        for (int i = 0; i < 9; i++) {
            names.add("free-" + i + "-" + UUID.randomUUID());
        }
        int before = store.sharedStatements()[0];

        List<AcquireReply> replies = together(() -> Flux.fromIterable(names)
                .flatMapSequential(name -> store.acquire(name, "me", 60_000, 0)).collectList());

        assertThat(store.sharedStatements()[0]).isEqualTo(before + 1);
        assertThat(replies.get(0).acquired()).isFalse();
        assertThat(replies.get(0).holderTtlMillis()).isBetween(1L, 60_000L);
        assertThat(replies.subList(1, replies.size())).allMatch(AcquireReply::acquired);
        // Releases share a statement as well; each answers for its own lock (the held one is not this owner's).
        int releasesBefore = store.sharedStatements()[1];
        List<Boolean> released = releasedTogether(() -> Flux.fromIterable(names)
                .flatMapSequential(name -> store.release(name, "me", null)).collectList());
        assertThat(store.sharedStatements()[1]).isEqualTo(releasesBefore + 1);
        assertThat(released.get(0)).isFalse();
        assertThat(released.subList(1, released.size())).containsOnly(true);
        assertThat(store.lock(held).block(WAIT)).isNotNull();
    }

    @Test
    void aStatementThatFailsAsAWholeFailsEveryMemberWithTheTypedError() {
        // A trigger that refuses one lock's row fails the whole statement that carries it (not a wait: no retry alone).
        String bad = "refused-" + UUID.randomUUID();
        sql("CREATE OR REPLACE FUNCTION fenced_shared_it_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                + " IF NEW.lock_id LIKE '%refused-%' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$");
        sql("DROP TRIGGER IF EXISTS fenced_shared_it_refuse ON " + TABLE);
        sql("CREATE TRIGGER fenced_shared_it_refuse BEFORE INSERT OR UPDATE ON " + TABLE
                + " FOR EACH ROW EXECUTE FUNCTION fenced_shared_it_refuse()");
        try {
            Object alone = store.acquire(bad, "me", 60_000, 0).map(Object.class::cast)
                    .onErrorResume(e -> Mono.just(e)).block(WAIT);
            assertThat(alone).isInstanceOf(LockServiceException.class);
            List<String> names = List.of(bad, "ok-1-" + UUID.randomUUID(), "ok-2-" + UUID.randomUUID());
            int before = store.sharedStatements()[0];

            List<Object> outcomes = together(() -> Flux.fromIterable(names)
                    .flatMapSequential(name -> store.acquire(name, "me", 60_000, 0).map(Object.class::cast)
                            .onErrorResume(e -> Mono.just(e)))
                    .collectList());

            assertThat(store.sharedStatements()[0]).isEqualTo(before + 1);
            for (int i = 0; i < names.size(); i++) {
                assertThat(outcomes.get(i)).isInstanceOf(alone.getClass());
                assertThat(((Throwable) outcomes.get(i)).getMessage()).contains(names.get(i)).contains("refused by the test");
            }
        } finally {
            sql("DROP TRIGGER IF EXISTS fenced_shared_it_refuse ON " + TABLE);
        }
    }

    @Test
    void aMemberGivenUpMidStatementLeavesNoOwnerlessLease() throws Exception {
        // The client's own store shares statements (as the builder's does unless switched off): the abandoned
        // request then leaves in the kept requests' statement, so its grant is in the table once theirs are.
        PostgresLeaseStore shared = PostgresLeaseStore.open(gate, TABLE, settings, null, true);
        try (FencedLockClient client = LeasingLockClient.create(shared, settings)) {
            List<String> names = new ArrayList<>();
            for (int i = 0; i < 6; i++) {
                names.add("member-" + i + "-" + UUID.randomUUID());
            }
            String abandoned = names.get(3);
            // Rows first, so that the grant below shows as a new token on an existing row.
            long first = client.acquire(abandoned).flatMap(l -> l.release().thenReturn(l.token())).block(WAIT);
            List<CompletableFuture<FencedLease>> kept = new ArrayList<>();
            int before = shared.sharedStatements()[0];
            together(shared, gate, name -> client.acquire(name).flatMap(FencedLease::release), () -> {
                for (String name : names) {
                    CompletableFuture<FencedLease> lease = client.acquire(name).toFuture();
                    if (name.equals(abandoned)) {
                        lease.cancel(true);
                    } else {
                        kept.add(lease);
                    }
                }
                return Mono.just(kept);
            }, () -> { });
            for (CompletableFuture<FencedLease> lease : kept) {
                lease.get(WAIT.toSeconds(), TimeUnit.SECONDS).release().block(WAIT);
            }
            assertThat(shared.sharedStatements()[0]).as("statements shared by several acquires").isEqualTo(before + 1);
            // The abandoned member's statement granted it a lease; the client gives it back, asynchronously.
            long deadline = System.nanoTime() + WAIT.toNanos();
            List<Object[]> row = row(abandoned);
            while ((row.isEmpty() || row.get(0)[0] != null) && System.nanoTime() < deadline) {
                Thread.sleep(20);
                row = row(abandoned);
            }
            assertThat(row).hasSize(1);
            assertThat(row.get(0)[0]).as("owner").isNull();
            assertThat((Long) row.get(0)[1]).as("token").isGreaterThan(first);
        }
    }

    /**
     * A renewal of several leases locks their rows in lock-id order: blocked at the lower id by another transaction, it
     * has not locked the higher one, though that lease came first in the request and its row first in the table. So
     * it cannot close a cycle with a shared release of the same client's leases, which takes them in that order too.
     */
    @Test
    void aRenewalOfSeveralLeasesLocksTheirRowsInLockIdOrder() throws Exception {
        String low = "order-a-" + UUID.randomUUID();
        String high = "order-b-" + UUID.randomUUID();
        AcquireReply highGrant = grantMine(high, 60_000);
        AcquireReply lowGrant = grantMine(low, 60_000);
        Connection tx = lockRow(low);
        try {
            CompletableFuture<List<Boolean>> renewed = renewMine(high, highGrant, low, lowGrant).toFuture();
            awaitWaiting(1, RENEWAL);
            assertThat(lockableNow(high)).as("the higher lock id's row, while the renewal waits for the lower one").isTrue();
            Mono.from(tx.commitTransaction()).block(WAIT);
            assertThat(renewed.get(WAIT.toSeconds(), TimeUnit.SECONDS)).containsExactly(true, true);
        } finally {
            Mono.from(tx.close()).block(WAIT);
        }
    }

    /**
     * Releases that share a statement wait for no row: one whose row another transaction has locked is skipped and
     * released alone, in the one-row statement, which waits for it; the others are released at once. Before, the
     * shared release waited for that row, holding up its other leases (and, with four such, every release of the
     * client).
     */
    @Test
    void aSharedReleaseSkipsARowLockedByAnotherTransactionAndReleasesItAlone() throws Exception {
        String low = "order-a-" + UUID.randomUUID();
        String high = "order-b-" + UUID.randomUUID();
        grantMine(high, 60_000);
        grantMine(low, 60_000);
        int before = store.sharedStatements()[1];
        Connection[] tx = new Connection[1];
        List<CompletableFuture<Boolean>> releases = new ArrayList<>();
        try {
            boolean releasedHigh = releasedTogether(() -> {
                tx[0] = lockRow(low);
                releases.add(store.release(high, "me", null).toFuture());
                releases.add(store.release(low, "me", null).toFuture());
                return Mono.fromFuture(releases.get(0));
            });
            assertThat(releasedHigh).as("the lease whose row nobody else locked, released at once").isTrue();
            assertThat(store.sharedStatements()[1]).isEqualTo(before + 1);
            awaitWaiting(1, "WITH released AS");
            assertThat(releases.get(1)).as("the lease whose row is locked, while the transaction is open").isNotDone();
            Mono.from(tx[0].commitTransaction()).block(WAIT);
            assertThat(releases.get(1).get(WAIT.toSeconds(), TimeUnit.SECONDS)).isTrue();
        } finally {
            if (tx[0] != null) {
                Mono.from(tx[0].close()).block(WAIT);
            }
        }
    }

    /**
     * Review finding: the ordered locking locked (and waited for) the owner's expired rows too, which the update skips;
     * an expired row locked by someone else (a takeover, a transaction that reads it FOR SHARE) held up every lease of
     * the renewal, and the renewal held up that row's next grant. Now only the rows the update changes are locked.
     */
    @Test
    void aRenewalDoesNotWaitForTheRowOfAnExpiredLease() throws Exception {
        String expired = "expired-" + UUID.randomUUID();
        String live = "live-" + UUID.randomUUID();
        AcquireReply gone = grantMine(expired, 1);
        AcquireReply held = grantMine(live, 60_000);
        sleep(20); // the 1 ms lease has run out
        Connection tx = lockRow(expired);
        try {
            List<Boolean> renewed = renewMine(expired, gone, live, held).block(WAIT);
            assertThat(renewed).as("renewed while the expired lease's row is locked by another transaction")
                    .containsExactly(false, true);
        } finally {
            Mono.from(tx.rollbackTransaction()).block(WAIT);
            Mono.from(tx.close()).block(WAIT);
        }
    }

    /** The same for releases that share a statement. */
    @Test
    void aSharedReleaseDoesNotWaitForTheRowOfAnExpiredLease() {
        String expired = "expired-" + UUID.randomUUID();
        String live = "live-" + UUID.randomUUID();
        grantMine(expired, 1);
        grantMine(live, 60_000);
        sleep(20);
        int before = store.sharedStatements()[1];
        Connection[] tx = new Connection[1];
        try {
            List<Boolean> released = releasedTogether(() -> {
                tx[0] = lockRow(expired);
                return Flux.just(expired, live).flatMapSequential(name -> store.release(name, "me", null)).collectList();
            });
            assertThat(released).containsExactly(false, true);
            assertThat(store.sharedStatements()[1]).isEqualTo(before + 1);
        } finally {
            if (tx[0] != null) {
                Mono.from(tx[0].rollbackTransaction()).block(WAIT);
                Mono.from(tx[0].close()).block(WAIT);
            }
        }
    }

    /**
     * Review finding: a shared acquire inserted the locks that had no row in its snapshot {@code ON CONFLICT DO UPDATE},
     * so a lock whose row another transaction committed meanwhile and then locked was waited for, while the statement
     * held the rows it had locked up front. A transaction that locks that row and then wants one of those (as a renewal
     * does, in lock-id order) closed a cycle, and PostgreSQL aborted one of the two with 40P01 after
     * {@code deadlock_timeout}. Now the statement waits for no row lock and holds none while it waits for an insert: the
     * lock answers skipped and is granted alone once the other transaction has ended.
     *
     * <p>Deterministic: the shared statement waits for a transaction of the test that inserts its lowest lock, until
     * the test has committed the middle lock's row and locked it in another transaction; that transaction asks for the
     * highest lock's row only once a statement of the store waits for it. The store's sessions wait a minute before
     * they look for a deadlock, so a cycle is always found by the test's transaction, whose statement then fails.
     */
    @ParameterizedTest(name = "store sessions at {0}")
    @ValueSource(strings = {"READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"})
    void aSharedAcquireClosesNoCycleWithATransactionThatLocksARowItHadNotSeen(String isolation) {
        ConnectionPool patient = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(postgresUrl))
                .maxSize(12)
                .postAllocate(c -> Flux.from(c.createStatement("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL "
                                + isolation + "; SET deadlock_timeout = '60s'").execute())
                        .concatMap(r -> r.getRowsUpdated()).then())
                .build());
        GatedConnections patientGate = new GatedConnections(patient);
        PostgresLeaseStore shared = PostgresLeaseStore.open(patientGate, TABLE, settings, null, true);
        String low = "cycle-a-" + UUID.randomUUID();
        String middle = "cycle-b-" + UUID.randomUUID();
        String high = "cycle-c-" + UUID.randomUUID();
        Connection inserting = null;
        Connection locking = null;
        try {
            // The highest lock's row exists (free): the shared statement locks it; the two others have none.
            freeRowThroughStore(shared, high);
            inserting = insertingInOpenTransaction(low);
            Connection insertingTx = inserting;
            Connection[] lockingTx = new Connection[1];
            Throwable[] lockedHigh = new Throwable[1];
            String[] waiter = new String[1];
            int before = shared.sharedStatements()[0];

            List<AcquireReply> replies = together(shared, patientGate, name -> shared.acquire(name, "blocked", 60_000, 0)
                            .flatMap(r -> shared.release(name, "blocked", null)),
                    () -> Flux.just(low, middle, high).flatMapSequential(name -> shared.acquire(name, "me", 60_000, 0)).collectList(),
                    () -> {
                        // The shared statement has its snapshot and waits for the insert of the lowest lock.
                        awaitWaiting(1, SHARED_ACQUIRE);
                        // Meanwhile the middle lock's row is committed, and another transaction locks it as a renewal would.
                        insertFreeRow(null, middle);
                        lockingTx[0] = lockRow(middle);
                        int pid = backendPid(lockingTx[0]);
                        Mono.from(insertingTx.rollbackTransaction()).block(WAIT);
                        // A statement of the store now waits for that transaction: the shared one (before) or the middle
                        // lock's acquire alone (now). The transaction then wants the highest lock's row.
                        waiter[0] = awaitBlockedBy(pid);
                        lockedHigh[0] = Flux.from(lockingTx[0].createStatement("SELECT lock_id FROM " + TABLE
                                                + " WHERE lock_id = $1 FOR NO KEY UPDATE").bind(0, lockId(high)).execute())
                                .concatMap(r -> r.map((row, meta) -> 1)).then().timeout(WAIT)
                                .then(Mono.<Throwable>empty()).onErrorResume(e -> Mono.just(e)).block();
                        Mono.from(lockedHigh[0] == null ? lockingTx[0].commitTransaction() : lockingTx[0].rollbackTransaction())
                                .block(WAIT);
                    });
            locking = lockingTx[0];

            assertThat(lockedHigh[0]).as("the other transaction's wait for the shared statement's row").isNull();
            assertThat(waiter[0]).as("the statement that waited for the other transaction").doesNotContain(SHARED_ACQUIRE);
            assertThat(shared.sharedStatements()[0]).isEqualTo(before + 1);
            assertThat(replies).allMatch(AcquireReply::acquired);
            for (int i = 0; i < 3; i++) {
                assertThat(row(List.of(low, middle, high).get(i)).get(0)).containsExactly("me", replies.get(i).token());
            }
        } finally {
            for (Connection c : new Connection[] {inserting, locking}) {
                if (c != null) {
                    Mono.from(c.close()).onErrorResume(e -> Mono.empty()).block(WAIT);
                }
            }
            shared.close().block(WAIT);
            patient.disposeLater().block(WAIT);
        }
    }

    @Test
    void aSharedAcquireWaitingForAnInsertHoldsNoRowOfTheLocksThatExisted() {
        String fresh = "gate-a-" + UUID.randomUUID();
        String existing = "gate-b-" + UUID.randomUUID();
        Connection inserting = null;
        try {
            // The second lock's row exists (free); the first lock's row is being inserted by an open transaction.
            freeRowThroughStore(store, existing);
            inserting = insertingInOpenTransaction(fresh);
            Connection insertingTx = inserting;
            boolean[] lockable = new boolean[1];
            List<AcquireReply> replies = together(store, gate, name -> store.acquire(name, "blocked", 60_000, 0)
                            .flatMap(r -> store.release(name, "blocked", null)),
                    () -> Flux.just(fresh, existing).flatMapSequential(name -> store.acquire(name, "me", 60_000, 0)).collectList(),
                    () -> {
                        // The shared statement waits for the first lock's insert: it must not hold the existing row
                        // meanwhile (it locks existing rows only after its inserts), or a renewal holding the first
                        // lock and wanting the second would close a cycle with it.
                        awaitWaiting(1, SHARED_ACQUIRE);
                        lockable[0] = lockableNow(existing);
                        Mono.from(insertingTx.rollbackTransaction()).block(WAIT);
                    });
            assertThat(lockable[0]).as("the existing row lockable at once while the shared statement waits").isTrue();
            assertThat(replies).allMatch(AcquireReply::acquired);
        } finally {
            if (inserting != null) {
                Mono.from(inserting.close()).onErrorResume(e -> Mono.empty()).block(WAIT);
            }
        }
    }

    /**
     * Review finding: a shared acquire waiting for one member's row, which another transaction has inserted and keeps
     * open, waited up to its lock wait bound, the command timeout and a margin: the client's timer failed every
     * member at the command timeout. Now the statement waits a quarter of the command timeout, is rolled back (55P03),
     * and each member runs again alone: the other locks are granted while that transaction is still open.
     */
    @Test
    void aSharedAcquireWaitingForAnOpenInsertLetsItsOtherLocksRunAlone() throws Exception {
        ClientSettings quick = ClientSettings.of(prefix, Duration.ofSeconds(60), null, Duration.ofSeconds(60),
                Duration.ofSeconds(3), null);
        GatedConnections quickGate = new GatedConnections(pool);
        PostgresLeaseStore quickStore = PostgresLeaseStore.open(quickGate, TABLE, quick, null, true);
        String stuck = "open-insert-" + UUID.randomUUID();
        List<String> names = List.of(stuck, "free-1-" + UUID.randomUUID(), "free-2-" + UUID.randomUUID());
        Connection inserting = insertingInOpenTransaction(stuck);
        try {
            int before = quickStore.sharedStatements()[0];
            List<CompletableFuture<AcquireReply>> replies = new ArrayList<>();
            together(quickStore, quickGate, name -> quickStore.acquire(name, "blocked", 60_000, 0), () -> {
                names.forEach(name -> replies.add(quickStore.acquire(name, "me", 60_000, 0).toFuture()));
                return Mono.just(replies);
            }, () -> { });
            assertThat(replies.get(1).get(WAIT.toSeconds(), TimeUnit.SECONDS).acquired()).as(names.get(1)).isTrue();
            assertThat(replies.get(2).get(WAIT.toSeconds(), TimeUnit.SECONDS).acquired()).as(names.get(2)).isTrue();
            assertThat(quickStore.sharedStatements()[0]).as("shared acquire statements").isEqualTo(before + 1);
            // The stuck lock's own statement still waits for the insert: the rollback lets it in.
            Mono.from(inserting.rollbackTransaction()).block(WAIT);
            assertThat(replies.get(0).get(WAIT.toSeconds(), TimeUnit.SECONDS).acquired()).as(stuck).isTrue();
        } finally {
            Mono.from(inserting.close()).onErrorResume(e -> Mono.empty()).block(WAIT);
            quickStore.close().block(WAIT);
            quick.scheduler().dispose();
        }
    }

    /**
     * Review finding (helper-7): every skipped acquire ran alone on a connection of its own, waiting for its row:
     * acquires of 40 locks under lease checks held 40 backends, and a renewal of the same client found no connection
     * in a small pool and its lease was lost. Now at most {@link StatementBatcher#MAX_ALONE} one-row acquires wait,
     * the others answer busy at once (their rows are locked by someone else), and the store holds no more than the
     * slots and those connections: a free lock is granted and a lease renewed meanwhile.
     */
    @Test
    void acquiresOfManyCheckedLocksHoldNoMoreConnectionsThanTheSlotsAndTheWaitingOnes() throws Exception {
        int n = 16;
        List<String> names = new ArrayList<>();
        Connection tx = Mono.from(pool.create()).block(WAIT);
        List<CompletableFuture<AcquireReply>> waiting = new ArrayList<>();
        try {
            Mono.from(tx.beginTransaction()).block(WAIT);
            for (int i = 0; i < n; i++) {
                String name = "checked-" + i + "-" + UUID.randomUUID();
                long token = grantMine(name, 60_000).token();
                Flux.from(tx.createStatement("SELECT 1 FROM " + TABLE + " WHERE lock_id = $1 AND owner = 'me' AND token = $2"
                                + " AND expires_at > clock_timestamp() FOR KEY SHARE").bind(0, lockId(name)).bind(1, token).execute())
                        .concatMap(r -> r.map((row, meta) -> 1)).then().block(WAIT);
                names.add(name);
            }
            String kept = "kept-" + UUID.randomUUID();
            AcquireReply keptGrant = grantMine(kept, 60_000);
            gate.resetPeak();
            names.forEach(name -> waiting.add(store.acquire(name, "waiter", 60_000, 0).toFuture()));
            awaitWaiting(StatementBatcher.MAX_ALONE, "ON CONFLICT");
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (waiting.stream().filter(CompletableFuture::isDone).count() < n - StatementBatcher.MAX_ALONE) {
                assertThat(System.nanoTime()).as("acquires answered while " + StatementBatcher.MAX_ALONE + " wait")
                        .isLessThan(deadline);
                Thread.sleep(10);
            }
            assertThat(waiting.stream().filter(CompletableFuture::isDone).map(CompletableFuture::join))
                    .as("acquires answered at once").noneMatch(AcquireReply::acquired);
            assertThat(store.acquire("free-" + UUID.randomUUID(), "waiter", 60_000, 0).block(WAIT).acquired())
                    .as("a free lock meanwhile").isTrue();
            assertThat(store.renew(List.of(new RenewRequest(kept, "me", keptGrant.token(), 60_000))).block(WAIT))
                    .as("a renewal meanwhile").containsExactly(true);
            assertThat(gate.peak()).as("connections of the store at once")
                    .isLessThanOrEqualTo(StatementBatcher.MAX_IN_FLIGHT + StatementBatcher.MAX_ALONE);
        } finally {
            Mono.from(tx.commitTransaction()).onErrorResume(e -> Mono.empty()).block(WAIT);
            Mono.from(tx.close()).block(WAIT);
        }
        for (CompletableFuture<AcquireReply> reply : waiting) {
            assertThat(reply.get(WAIT.toSeconds(), TimeUnit.SECONDS).acquired()).as("held by its holder").isFalse();
        }
    }

    @Test
    void tokensRiseStrictlyAcrossSharedAndOwnStatements() {
        PostgresLeaseStore alone = PostgresLeaseStore.open(pool, TABLE, settings, null, false);
        try {
            String name = "rising-" + UUID.randomUUID();
            List<Long> tokens = new ArrayList<>();
            for (int round = 0; round < 3; round++) {
                List<AcquireReply> replies = together(() -> Flux.just(name, "other-" + UUID.randomUUID())
                        .flatMapSequential(n -> store.acquire(n, "shared", 60_000, 0)).collectList());
                tokens.add(replies.get(0).token());
                assertThat(store.release(name, "shared", replies.get(0).token()).block(WAIT)).isTrue();
                tokens.add(alone.acquire(name, "own", 60_000, 0).block(WAIT).token());
                // Force-released: the next grant, shared, must still go above the broken token.
                assertThat(alone.breakLock(name, 0).block(WAIT).held()).isTrue();
                tokens.add(together(() -> Flux.just(name, "another-" + UUID.randomUUID())
                        .flatMapSequential(n -> store.acquire(n, "after-break", 1, 0)).collectList()).get(0).token());
                // That lease of 1 ms expires: the next grant, alone, goes above it too.
                sleep(20);
                tokens.add(alone.acquire(name, "own-2", 60_000, 0).block(WAIT).token());
                assertThat(alone.release(name, "own-2", null).block(WAIT)).isTrue();
            }
            assertThat(tokens).isSorted().doesNotHaveDuplicates().doesNotContain(0L);
        } finally {
            alone.close().block(WAIT);
        }
    }

    @Test
    void aHandOffTakesTheLockOverInOneStatementOnlyFromTheLeaseThatHoldsIt() {
        java.util.concurrent.atomic.AtomicInteger statements = new java.util.concurrent.atomic.AtomicInteger();
        io.r2dbc.spi.ConnectionFactory counted = new io.r2dbc.spi.ConnectionFactory() {
            @Override
            public org.reactivestreams.Publisher<? extends Connection> create() {
                statements.incrementAndGet();
                return pool.create();
            }

            @Override
            public io.r2dbc.spi.ConnectionFactoryMetadata getMetadata() {
                return pool.getMetadata();
            }
        };
        PostgresLeaseStore store = PostgresLeaseStore.open(counted, TABLE, settings, null, true);
        try {
            handOff(store, statements);
        } finally {
            store.close().block(WAIT);
        }
    }

    private void handOff(PostgresLeaseStore store, java.util.concurrent.atomic.AtomicInteger statements) {
        String name = "handoff-" + UUID.randomUUID();
        long first = store.acquire(name, "a", 60_000, 0).block(WAIT).token();
        int before = statements.get();

        dev.fenced.lock.internal.LeaseStore.Handoff handed = store.handOff(name, "a", first, "b", 60_000, 0).block(WAIT);

        assertThat(statements.get() - before).as("statements of a hand-off").isEqualTo(1);
        assertThat(handed.released()).isTrue();
        assertThat(handed.next().acquired()).isTrue();
        assertThat(handed.next().token()).isGreaterThan(first);
        assertThat(row(name).get(0)[0]).isEqualTo("b");
        // "a" no longer holds the lock: its hand-off takes nothing from "b", reports no release, and "c" is busy.
        dev.fenced.lock.internal.LeaseStore.Handoff stale = store.handOff(name, "a", first, "c", 60_000, 0).block(WAIT);
        assertThat(stale.released()).isFalse();
        assertThat(stale.next().acquired()).isFalse();
        assertThat(row(name).get(0)[0]).isEqualTo("b");
        assertThat((Long) row(name).get(0)[1]).isEqualTo(handed.next().token());
    }

    /**
     * Runs {@code requests} while a lone acquire and one acquire a statement slot wait for their connections at the
     * gate, so that the requests queue up and leave in one statement when the gate opens.
     */
    private <T> T together(Supplier<Mono<T>> requests) {
        return together(store, gate, name -> store.acquire(name, "blocked", 60_000, 0), requests, () -> { });
    }

    /** {@link #together(Supplier)} for releases: the statements waiting at the gate are releases. */
    private <T> T releasedTogether(Supplier<Mono<T>> requests) {
        return releasedTogether(requests, () -> { });
    }

    private <T> T releasedTogether(Supplier<Mono<T>> requests, ThrowingRunnable whileSent) {
        return together(store, gate, name -> store.release(name, "blocker", null), requests, whileSent);
    }

    /** A grant of lock {@code name} to owner {@code me} for {@code leaseMillis}, asserted granted. */
    private AcquireReply grantMine(String name, long leaseMillis) {
        AcquireReply grant = store.acquire(name, "me", leaseMillis, 0).block(WAIT);
        assertThat(grant.acquired()).as("granted " + name).isTrue();
        return grant;
    }

    /** One renewal, for 60 s, of two grants of owner {@code me}, in this order. */
    private Mono<List<Boolean>> renewMine(String first, AcquireReply firstGrant, String second, AcquireReply secondGrant) {
        return store.renew(List.of(new RenewRequest(first, "me", firstGrant.token(), 60_000),
                new RenewRequest(second, "me", secondGrant.token(), 60_000)));
    }

    /** A step of a test that may throw. */
    private interface ThrowingRunnable {
        void run() throws Exception;
    }

    /** A transaction of the test, left open, that holds the row of lock {@code name} as an update would. */
    private Connection lockRow(String name) {
        Connection tx = Mono.from(pool.create()).block(WAIT);
        Mono.from(tx.beginTransaction()).block(WAIT);
        Flux.from(tx.createStatement("SELECT lock_id FROM " + TABLE + " WHERE lock_id = $1 FOR NO KEY UPDATE")
                        .bind(0, settings.keyPrefix() + "{" + name + "}").execute())
                .concatMap(r -> r.map((row, meta) -> 1)).then().block(WAIT);
        return tx;
    }

    /** Whether the row of lock {@code name} can be locked as an update would at once ({@code NOWAIT}). */
    private boolean lockableNow(String name) {
        return Flux.usingWhen(pool.create(), c -> Flux.from(c.beginTransaction())
                                .thenMany(Flux.from(c.createStatement("SELECT lock_id FROM " + TABLE
                                                + " WHERE lock_id = $1 FOR NO KEY UPDATE NOWAIT")
                                        .bind(0, settings.keyPrefix() + "{" + name + "}").execute()))
                                .concatMap(r -> r.map((row, meta) -> 1))
                                .then(Mono.from(c.rollbackTransaction()))
                                .thenReturn(true)
                                .onErrorResume(io.r2dbc.spi.R2dbcException.class,
                                        e -> "55P03".equals(e.getSqlState()) ? Mono.just(false) : Mono.error(e)),
                        Connection::close)
                .blockLast(WAIT);
    }

    /**
     * Runs {@code requests} on {@code store}, whose connections come through {@code gate}, once {@code blocked} (a
     * request of the same kind, on a lock of its own) has been sent {@link StatementBatcher#MAX_IN_FLIGHT} + 1 times
     * with the gate closed: the first alone, outside the slots, then one a slot, all waiting for a connection. The
     * requests queue up meanwhile and leave together when the gate opens; {@code whileSent} runs then.
     */
    private <T> T together(PostgresLeaseStore store, GatedConnections gate, java.util.function.Function<String, Mono<?>> blocked,
            Supplier<Mono<T>> requests, ThrowingRunnable whileSent) {
        try {
            gate.takeEverySlot(blocked, WAIT);
            CompletableFuture<T> result = requests.get().toFuture();
            Thread.sleep(100); // requests that hop threads on their way to the store queue up too
            gate.open();
            whileSent.run();
            return result.get(WAIT.toSeconds(), TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new AssertionError(e);
        } finally {
            gate.open();
        }
    }

    /** Waits until {@code n} statements on the table wait for a row lock. */
    private void awaitWaiting(int n) throws InterruptedException {
        awaitWaiting(n, TABLE);
    }

    /** Waits until {@code n} statements whose text has {@code fragment} wait for a row lock. */
    private void awaitWaiting(int n, String fragment) throws InterruptedException {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            Long waiting = Flux.usingWhen(pool.create(), c -> Flux.from(c.createStatement("SELECT count(*) FROM pg_stat_activity"
                                    + " WHERE wait_event_type = 'Lock' AND query LIKE '%" + TABLE + "%' AND strpos(query, $1) > 0")
                                    .bind(0, fragment).execute())
                            .concatMap(r -> r.map((row, meta) -> row.get(0, Long.class))), Connection::close)
                    .blockLast(WAIT);
            if (waiting != null && waiting >= n) {
                return;
            }
            Thread.sleep(10);
        }
        throw new AssertionError("the blocking acquires never waited for their rows");
    }

    /** Gives lock {@code name} a free row through {@code store}: a grant, then its release. */
    private static void freeRowThroughStore(PostgresLeaseStore store, String name) {
        assertThat(store.acquire(name, "earlier", 60_000, 0).block(WAIT).acquired()).isTrue();
        assertThat(store.release(name, "earlier", null).block(WAIT)).isTrue();
    }

    /** A transaction of the test, left open, that has inserted a free row of lock {@code name}. */
    private Connection insertingInOpenTransaction(String name) {
        Connection tx = Mono.from(pool.create()).block(WAIT);
        Mono.from(tx.beginTransaction()).block(WAIT);
        insertFreeRow(tx, name);
        return tx;
    }

    /** Inserts a free row of lock {@code name} in the open transaction {@code tx}, or on its own if {@code null}. */
    private void insertFreeRow(Connection tx, String name) {
        String insert = "INSERT INTO " + TABLE + " (lock_id, owner, token, expires_at) VALUES ($1, NULL, 1, clock_timestamp())";
        if (tx == null) {
            Flux.usingWhen(pool.create(), c -> Flux.from(c.createStatement(insert).bind(0, lockId(name)).execute())
                    .concatMap(r -> r.getRowsUpdated()), Connection::close).then().block(WAIT);
        } else {
            Flux.from(tx.createStatement(insert).bind(0, lockId(name)).execute()).concatMap(r -> r.getRowsUpdated()).then().block(WAIT);
        }
    }

    private String lockId(String name) {
        return settings.keyPrefix() + "{" + name + "}";
    }

    private static int backendPid(Connection c) {
        return Flux.from(c.createStatement("SELECT pg_backend_pid()").execute())
                .concatMap(r -> r.map((row, meta) -> row.get(0, Integer.class))).blockLast(WAIT);
    }

    /** Waits until a session waits for a lock that the backend {@code pid} holds; its statement's text. */
    private String awaitBlockedBy(int pid) throws InterruptedException {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            String blocked = Flux.usingWhen(pool.create(), c -> Flux.from(c.createStatement("SELECT query FROM pg_stat_activity"
                                    + " WHERE $1 = ANY(pg_blocking_pids(pid))").bind(0, pid).execute())
                            .concatMap(r -> r.map((row, meta) -> row.get(0, String.class))), Connection::close)
                    .blockLast(WAIT);
            if (blocked != null) {
                return blocked;
            }
            Thread.sleep(10);
        }
        throw new AssertionError("no session ever waited for backend " + pid);
    }

    private List<Object[]> row(String name) {
        return Flux.usingWhen(pool.create(), c -> Flux.from(c.createStatement("SELECT owner, token FROM " + TABLE
                                + " WHERE lock_id = $1").bind(0, settings.keyPrefix() + "{" + name + "}").execute())
                        .concatMap(r -> r.map((row, meta) -> new Object[] {row.get("owner", String.class), row.get("token", Long.class)})),
                Connection::close).collectList().block(WAIT);
    }

    private void sql(String sql) {
        Flux.usingWhen(pool.create(), c -> Flux.from(c.createStatement(sql).execute()).concatMap(r -> r.getRowsUpdated()),
                Connection::close).then().block(WAIT);
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }
}
