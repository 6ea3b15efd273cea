package dev.fenced.r2dbc;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.ForceReleaseResult;
import dev.fenced.lock.PostgresLeaseTable;
import dev.fenced.lock.StaleFencingTokenException;
import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import dev.fenced.testservices.RedisServer;
import dev.fenced.testservices.RedisServerExtension;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.test.StepVerifier;

/**
 * What {@link FencedLockClient#forceRelease} promises about storage, end to end: after a lock is broken and the
 * next holder has written, every fenced write of the broken holder is refused by the token rule; before that, a
 * token-only write of the broken holder is still accepted (the README says so); a write that checks the lease row
 * ({@link FencedWrite#checkLease}) is refused at once. The broken holder is played by a {@link TestLease} with its
 * grant, as a holder that stalled through the break still believes it holds the lock.
 */
@ExtendWith({RedisServerExtension.class, PostgresServerExtension.class})
class ForceReleaseIT {

    private static final Duration BOUND = Duration.ofSeconds(30);
    private static final String NAME = "invoice:42";
    private static final PostgresLeaseTable LEASES = PostgresLeaseTable.named("fenced_lease_force_release_it");

    private TestDatabase db;
    private String table;
    private final String prefix = "force-" + UUID.randomUUID() + ":";

    @BeforeEach
    void setUp(PostgresServer postgres) {
        db = TestDatabase.postgres(postgres);
        table = TestDatabase.uniqueName("invoices");
        db.execute("CREATE TABLE " + table + " (id bigint PRIMARY KEY, status text NOT NULL, fencing_token bigint, "
                + "fencing_owner text)", "INSERT INTO " + table + " (id, status) VALUES (42, 'OPEN')");
        LEASES.create(db.connections).block(BOUND);
    }

    @AfterEach
    void tearDown() {
        db.execute("DROP TABLE IF EXISTS " + table);
        db.close();
    }

    private FencedWrite settle(String status) {
        return FencedWrite.into(table).key("id", 42).set("status", status);
    }

    private List<Object> row() {
        return db.query("SELECT status, fencing_token FROM " + table + " WHERE id = 42").get(0);
    }

    @Test
    void onRedisTheBrokenHoldersWritesAreRefusedOnceTheNextHolderHasWritten(RedisServer redis) {
        try (FencedLockClient stalledClient = FencedLockClient.builder().redisUri(redis.uri()).keyPrefix(prefix).build();
                FencedLockClient operator = FencedLockClient.builder().redisUri(redis.uri()).keyPrefix(prefix).build()) {
            FencedLease granted = stalledClient.acquire(NAME).block(BOUND);
            assertThat(granted).isNotNull();
            TestLease broken = new TestLease(prefix, NAME, granted.token(), granted.ownerId());
            StepVerifier.create(settle("DRAFT").update(db.connections, broken)).expectNext(1L).verifyComplete();

            StepVerifier.create(operator.forceRelease(NAME, "test: holder stalled").map(ForceReleaseResult::token))
                    .expectNext(granted.token()).verifyComplete();
            // Not guaranteed, and documented: until a newer token is written, the token rule has nothing to refuse.
            StepVerifier.create(settle("LATE").update(db.connections, broken)).expectNext(1L).verifyComplete();

            FencedLease next = operator.acquire(NAME).block(BOUND);
            assertThat(next).isNotNull();
            assertThat(next.token()).isGreaterThan(granted.token());
            StepVerifier.create(settle("PAID").update(db.connections, next)).expectNext(1L).verifyComplete();

            StepVerifier.create(settle("VOID").update(db.connections, broken))
                    .verifyErrorSatisfies(e -> {
                        assertThat(e).isInstanceOf(StaleFencingTokenException.class);
                        assertThat(((StaleFencingTokenException) e).presentedToken()).isEqualTo(granted.token());
                    });
            assertThat(row()).containsExactly("PAID", next.token());
        }
    }

    @Test
    void onThePostgresStoreAWriteThatChecksTheLeaseIsRefusedAtOnce() {
        try (FencedLockClient stalledClient = FencedLockClient.builder().postgres(db.connections, LEASES).keyPrefix(prefix)
                        .build();
                FencedLockClient operator = FencedLockClient.builder().postgres(db.connections, LEASES).keyPrefix(prefix)
                        .build()) {
            FencedLease granted = stalledClient.acquire(NAME).block(BOUND);
            assertThat(granted).isNotNull();
            TestLease broken = new TestLease(prefix, NAME, granted.token(), granted.ownerId());

            StepVerifier.create(operator.forceRelease(NAME, "test: holder stalled").map(ForceReleaseResult::outcome))
                    .expectNext(ForceReleaseResult.Outcome.RELEASED).verifyComplete();
            StepVerifier.create(settle("LATE").checkLease(LEASES).update(db.connections, broken))
                    .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(LeaseCheckFailedException.class));
            assertThat(row()).containsExactly("OPEN", null);

            FencedLease next = operator.acquire(NAME).block(BOUND);
            assertThat(next).isNotNull();
            assertThat(next.token()).isGreaterThan(granted.token());
            StepVerifier.create(settle("PAID").checkLease(LEASES).update(db.connections, next)).expectNext(1L).verifyComplete();
            StepVerifier.create(settle("VOID").update(db.connections, broken))
                    .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(StaleFencingTokenException.class));
            assertThat(row()).containsExactly("PAID", next.token());
        }
    }
}
