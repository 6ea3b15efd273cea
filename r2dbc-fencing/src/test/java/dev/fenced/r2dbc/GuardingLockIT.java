package dev.fenced.r2dbc;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.AmbiguousLeaseException;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.StaleFencingTokenException;
import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import dev.fenced.testservices.RedisServer;
import dev.fenced.testservices.RedisServerExtension;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

/**
 * A fenced write uses the lease of the lock that guards it, never a lease of another lock that happens to be
 * in scope: tokens of two locks come from two counters and must never be compared. On real Redis and
 * PostgreSQL.
 */
@ExtendWith({RedisServerExtension.class, PostgresServerExtension.class})
class GuardingLockIT {

    private static final Duration BOUND = Duration.ofSeconds(30);

    private TestDatabase db;
    private FencedLockClient locks;
    private String prefix;
    private String invoices;
    private FenceTable fence;

    @BeforeEach
    void setUp(RedisServer redis, PostgresServer postgres) {
        db = TestDatabase.postgres(postgres);
        prefix = "guard-" + UUID.randomUUID() + ":";
        locks = FencedLockClient.builder().redisUri(redis.uri()).keyPrefix(prefix).build();
        invoices = TestDatabase.uniqueName("invoices");
        fence = FenceTable.named(TestDatabase.uniqueName("fence"));
        StepVerifier.create(fence.create(db.connections)).verifyComplete();
        db.execute("CREATE TABLE " + invoices + " (id bigint PRIMARY KEY, status text NOT NULL, "
                + "fencing_token bigint, fencing_owner text)", "INSERT INTO " + invoices + " (id, status) VALUES (42, 'OPEN')");
    }

    @AfterEach
    void tearDown() {
        locks.close();
        db.execute("DROP TABLE IF EXISTS " + invoices, "DROP TABLE IF EXISTS " + fence.name());
        db.close();
    }

    private FencedWrite settle(String status) {
        return FencedWrite.into(invoices).key("id", 42).set("status", status);
    }

    private List<Object> row() {
        return db.query("SELECT status, fencing_token FROM " + invoices + " WHERE id = 42").get(0);
    }

    /** withLease("invoice:42", a -> withLease("customer:7", b -> work(a, b))), collecting what the work emits. */
    private <T> Flux<T> nested(java.util.function.BiFunction<FencedLease, FencedLease, Mono<T>> work) {
        return locks.withLease("invoice:42", a -> locks.withLease("customer:7", b -> work.apply(a, b)));
    }

    @Test
    void aContextWriteUnderTwoLocksNamingNoneFailsBeforeAnySql() {
        StepVerifier.create(nested((a, b) -> settle("SETTLED").update(db.connections)))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(AmbiguousLeaseException.class)
                        .hasMessage("A fenced write of " + invoices + " cannot tell which lease to use: the Reactor Context "
                                + "holds leases on 'invoice:42', 'customer:7'; name the lock that guards it")
                        .extracting(x -> ((AmbiguousLeaseException) x).lockNames()).isEqualTo(List.of("invoice:42", "customer:7")));
        assertThat(row()).as("nothing was written").isEqualTo(Arrays.asList("OPEN", null));
    }

    @Test
    void aGuardedWriteCarriesTheTokenOfItsGuardInsideNestedScopes() {
        long[] tokens = new long[2];
        StepVerifier.create(nested((a, b) -> {
            tokens[0] = a.token();
            tokens[1] = b.token();
            return settle("SETTLED").guardedBy("invoice:42").update(db.connections);
        })).expectNext(1L).verifyComplete();
        assertThat(row()).containsExactly("SETTLED", tokens[0]);
        assertThat(tokens[1]).as("the other lock's token, which must not be the one written").isNotEqualTo(tokens[0]);
    }

    @Test
    void aGuardedWriteGivenTheLeaseOfAnotherLockIsRefusedBeforeAnySql() {
        FencedLease customer = locks.acquire("customer:7").block(BOUND);
        assertThat(customer).isNotNull();
        StepVerifier.create(settle("SETTLED").guardedBy("invoice:42").update(db.connections, customer))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(IllegalArgumentException.class)
                        .hasMessage("A fenced write of " + invoices + " is guarded by lock 'invoice:42', but was given the lease "
                                + "on 'customer:7': tokens of different locks cannot be compared"));
        assertThat(row()).isEqualTo(Arrays.asList("OPEN", null));
        customer.release().block(BOUND);
    }

    @Test
    void aGuardedWriteOutsideItsGuardsScopeSaysWhichLockItNeeds() {
        StepVerifier.create(locks.withLease("customer:7", b -> settle("SETTLED").guardedBy("invoice:42").update(db.connections)))
                .verifyErrorMessage("A fenced write of " + invoices + " is guarded by lock 'invoice:42', but the Reactor Context "
                        + "holds no lease on it: run it inside FencedLockClient.withLease(\"invoice:42\", ...), or pass the lease");
    }

    @Test
    void theDelayedWriteOfTheWrongLockNoLongerOverwritesTheNewHolder() {
        // The scenario of the review: a write inside invoice:42 and customer:7 used to carry customer:7's token.
        // Named, it carries invoice:42's, so a later holder of invoice:42 wins whichever token customer:7 has.
        for (int i = 0; i < 3; i++) {
            locks.withLease("customer:7", b -> Mono.just(b.token())).blockLast(BOUND); // customer:7's counter moves ahead
        }
        FencedLease[] early = new FencedLease[1];
        nested((a, b) -> {
            early[0] = new TestLease(prefix, a.name(), a.token(), a.ownerId()); // what the delayed write carries
            return Mono.just(a.token());
        }).blockLast(BOUND);
        StepVerifier.create(locks.withLease("invoice:42", later -> settle("BY-LATER-HOLDER").update(db.connections)))
                .expectNext(1L).verifyComplete();
        StepVerifier.create(settle("DELAYED").guardedBy("invoice:42").update(db.connections, early[0]))
                .verifyError(StaleFencingTokenException.class);
        assertThat(row().get(0)).isEqualTo("BY-LATER-HOLDER");
    }

    @Test
    void fenceRowsAreKeyedByTheLockIdSoTwoPrefixesNeverShareOne(RedisServer redis) {
        try (FencedLockClient other = FencedLockClient.builder().redisUri(redis.uri()).keyPrefix(prefix + "other:").build()) {
            String lockIdHere = inFence(locks, "ledger:7");
            String lockIdThere = inFence(other, "ledger:7");
            assertThat(lockIdHere).isEqualTo(prefix + "{ledger:7}");
            assertThat(lockIdThere).isEqualTo(prefix + "other:{ledger:7}");
            assertThat(db.query("SELECT resource, lock_id FROM " + fence.name() + " ORDER BY resource"))
                    .containsExactlyInAnyOrder(List.of(lockIdHere, lockIdHere), List.of(lockIdThere, lockIdThere));
        }
    }

    private String inFence(FencedLockClient client, String name) {
        String[] lockId = new String[1];
        client.withLease(name, lease -> {
            lockId[0] = lease.lockId();
            return fence.inTransaction(db.connections, c -> Mono.just(1));
        }).blockLast(BOUND);
        return lockId[0];
    }

    @Test
    void aResourceFencedByOneLockRefusesTheLeaseOfAnother() {
        Mono<Void> byInvoice = locks.withLease("invoice:42", a -> inTransaction(c -> fence.advance(c, a, "ledger"))).then();
        StepVerifier.create(byInvoice).verifyComplete();
        StepVerifier.create(locks.withLease("customer:7", b -> inTransaction(c -> fence.advance(c, b, "ledger"))))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(FenceLockMismatchException.class)
                        .hasMessage("Resource 'ledger' of fence " + fence.name() + " holds the tokens of lock " + prefix
                                + "{invoice:42}; the lease on lock " + prefix + "{customer:7} cannot advance it (tokens of "
                                + "different locks cannot be compared)"));
        assertThat(db.query("SELECT lock_id FROM " + fence.name() + " WHERE resource = 'ledger'"))
                .containsExactly(List.of(prefix + "{invoice:42}"));
    }

    private Mono<Void> inTransaction(java.util.function.Function<Connection, Mono<Void>> work) {
        return Mono.usingWhen(db.connections.create(),
                c -> Mono.from(c.beginTransaction()).then(work.apply(c)).then(Mono.from(c.commitTransaction())),
                Connection::close, (c, e) -> c.close(), Connection::close);
    }

    @Test
    void aFenceTableCreatedByAnEarlierVersionGetsTheLockIdColumn() {
        FenceTable old = FenceTable.named(TestDatabase.uniqueName("oldfence"));
        try {
            db.execute("CREATE TABLE " + old.name() + " (resource text PRIMARY KEY, last_token bigint NOT NULL, "
                    + "last_owner text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())",
                    "INSERT INTO " + old.name() + " (resource, last_token, last_owner) VALUES ('" + prefix + "{ledger:7}', 5, 'x')");
            StepVerifier.create(old.create(db.connections)).verifyComplete();
            StepVerifier.create(locks.withLease("ledger:7", lease -> old.inTransaction(db.connections, c -> Mono.just(lease.token()))))
                    .expectNextCount(1).verifyComplete();
            assertThat(db.query("SELECT lock_id FROM " + old.name())).containsExactly(List.of(prefix + "{ledger:7}"));
        } finally {
            db.execute("DROP TABLE IF EXISTS " + old.name());
        }
    }
}
