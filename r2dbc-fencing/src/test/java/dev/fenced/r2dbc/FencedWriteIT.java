package dev.fenced.r2dbc;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.FencedRowNotFoundException;
import dev.fenced.lock.LeaseNotHeldException;
import dev.fenced.lock.StaleFencingTokenException;
import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;
import java.util.stream.LongStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

/** Token-guarded UPDATE and UPSERT against a real PostgreSQL. */
@ExtendWith(PostgresServerExtension.class)
class FencedWriteIT {

    private static final Duration BOUND = Duration.ofSeconds(30);

    private Postgres db;
    private String table;

    @BeforeEach
    void setUp(PostgresServer server) {
        db = new Postgres(server);
        table = Postgres.uniqueName("invoices");
        db.execute("CREATE TABLE " + table + " (id bigint PRIMARY KEY, status text NOT NULL, amount bigint NOT NULL, "
                + "fencing_token bigint, fencing_owner text)");
        db.execute("INSERT INTO " + table + " (id, status, amount) VALUES (42, 'OPEN', 0)");
    }

    @AfterEach
    void tearDown() {
        db.execute("DROP TABLE IF EXISTS " + table);
        db.close();
    }

    private FencedWrite invoice(long id, String status, long amount) {
        return FencedWrite.into(table).key("id", id).set("status", status).set("amount", amount);
    }

    private List<Object> row(long id) {
        List<List<Object>> rows = db.query("SELECT status, amount, fencing_token, fencing_owner FROM " + table + " WHERE id = " + id);
        assertThat(rows).hasSize(1);
        return rows.get(0);
    }

    @Test
    void freshLeaseWritesTheValuesWithItsTokenAndOwner() {
        TestLease lease = new TestLease("invoice:42", 7, "owner-a");
        StepVerifier.create(invoice(42, "PAID", 100).update(db.connections, lease)).expectNext(1L).verifyComplete();
        assertThat(row(42)).containsExactly("PAID", 100L, 7L, "owner-a");
    }

    @Test
    void sameLeaseMayWriteTheRowTwiceByDefault() {
        TestLease lease = new TestLease("invoice:42", 7, "owner-a");
        StepVerifier.create(invoice(42, "PAID", 100).update(db.connections, lease)).expectNext(1L).verifyComplete();
        StepVerifier.create(invoice(42, "SHIPPED", 100).update(db.connections, lease)).expectNext(1L).verifyComplete();
        assertThat(row(42)).containsExactly("SHIPPED", 100L, 7L, "owner-a");
    }

    @Test
    void strictRuleRejectsTheSecondWriteOfTheSameLeaseWithoutLosingIt() {
        TestLease lease = new TestLease("invoice:42", 7, "owner-a");
        FencedWrite strict = invoice(42, "PAID", 100).rule(FencingRule.STRICTLY_NEWER);
        StepVerifier.create(strict.update(db.connections, lease)).expectNext(1L).verifyComplete();
        StepVerifier.create(strict.update(db.connections, lease))
                .verifyErrorSatisfies(e -> {
                    assertThat(e).isInstanceOf(StaleFencingTokenException.class);
                    StaleFencingTokenException stale = (StaleFencingTokenException) e;
                    assertThat(stale.presentedToken()).isEqualTo(7);
                    assertThat(stale.storedToken()).isEqualTo(7);
                    assertThat(stale).hasMessageEndingWith("storage holds token 7 from this same lease (the strict rule "
                            + "accepts one write per token)");
                });
        assertThat(lease.reportedNewerToken).as("no newer holder: the lease stays").hasValue(-1);
        assertThat(lease.isHeld()).isTrue();
    }

    @Test
    void sameTokenFromAnotherOwnerIsRejected() {
        // A lock service that lost its data can re-issue token 7 to another owner.
        TestLease first = new TestLease("invoice:42", 7, "owner-a");
        TestLease reissued = new TestLease("invoice:42", 7, "owner-b");
        StepVerifier.create(invoice(42, "PAID", 100).update(db.connections, first)).expectNext(1L).verifyComplete();
        StepVerifier.create(invoice(42, "VOID", 0).update(db.connections, reissued))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(StaleFencingTokenException.class)
                        .hasMessage("Write to " + table + " (id = 42) with fencing token 7 of lock 'invoice:42' was "
                                + "rejected: storage holds token 7 from another owner"));
        assertThat(row(42)).containsExactly("PAID", 100L, 7L, "owner-a");
        assertThat(reissued.reportedNewerToken).hasValue(7);
    }

    @Test
    void olderTokenIsRejectedWithBothTokensAndTheLeaseIsTold() {
        StepVerifier.create(invoice(42, "PAID", 100).update(db.connections, new TestLease("invoice:42", 9, "b")))
                .expectNext(1L).verifyComplete();
        TestLease stale = new TestLease("invoice:42", 8, "a");
        StepVerifier.create(invoice(42, "VOID", 0).update(db.connections, stale))
                .verifyErrorSatisfies(e -> {
                    StaleFencingTokenException rejected = (StaleFencingTokenException) e;
                    assertThat(rejected.lockName()).isEqualTo("invoice:42");
                    assertThat(rejected.presentedToken()).isEqualTo(8);
                    assertThat(rejected.storedToken()).isEqualTo(9);
                    assertThat(rejected.storedOwner()).isEqualTo("b");
                });
        assertThat(stale.reportedNewerToken).hasValue(9);
        assertThat(row(42)).containsExactly("PAID", 100L, 9L, "b");
    }

    @Test
    void missingRowIsNotReportedAsStale() {
        StepVerifier.create(invoice(404, "PAID", 1).update(db.connections, new TestLease("invoice:404", 1, "a")))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(FencedRowNotFoundException.class)
                        .hasMessage("No row to update in " + table + " (id = 404) (write under lock 'invoice:404')"));
    }

    @Test
    void upsertInsertsAMissingRowThenGuardsIt() {
        StepVerifier.create(invoice(7, "OPEN", 5).upsert(db.connections, new TestLease("invoice:7", 3, "a")))
                .expectNext(1L).verifyComplete();
        StepVerifier.create(invoice(7, "PAID", 5).upsert(db.connections, new TestLease("invoice:7", 4, "b")))
                .expectNext(1L).verifyComplete();
        StepVerifier.create(invoice(7, "VOID", 0).upsert(db.connections, new TestLease("invoice:7", 3, "a")))
                .verifyErrorSatisfies(e -> assertThat(((StaleFencingTokenException) e).storedToken()).isEqualTo(4));
        assertThat(row(7)).containsExactly("PAID", 5L, 4L, "b");
    }

    @Test
    void leaseThatIsNotHeldIsRefusedBeforeAnySql() {
        TestLease released = new TestLease("invoice:42", 7, "a");
        released.release().block();
        // The table does not exist: any SQL sent would fail differently.
        StepVerifier.create(FencedWrite.into("no_such_table").key("id", 1).set("x", 1).update(db.connections, released))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(LeaseNotHeldException.class)
                        .hasMessage("The lease on lock 'invoice:42' with fencing token 7 is not held (released, lost or past "
                                + "its deadline); the write was not sent"));
    }

    @Test
    void missingTokenColumnIsNamed() {
        String plain = Postgres.uniqueName("plain");
        db.execute("CREATE TABLE " + plain + " (id bigint PRIMARY KEY, status text)", "INSERT INTO " + plain + " VALUES (1, 'x')");
        try {
            StepVerifier.create(FencedWrite.into(plain).key("id", 1).set("status", "y").update(db.connections, new TestLease("p", 1, "a")))
                    .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(IllegalStateException.class)
                            .hasMessageContaining("token \"fencing_token\" (bigint)")
                            .hasMessageContaining("column \"fencing_token\""));
        } finally {
            db.execute("DROP TABLE " + plain);
        }
    }

    @Test
    void writeOutsideALeaseScopeSaysHowToProvideOne() {
        StepVerifier.create(invoice(42, "PAID", 1).update(db.connections))
                .verifyErrorMessage("A fenced write of " + table + " needs a lease, and the Reactor Context holds none: run it "
                        + "inside FencedLockClient.withLease(...), or pass the lease");
    }

    @Test
    void concurrentWritersWithInterleavedTokensLeaveTheNewestAcceptedWrite() {
        String audit = Postgres.uniqueName("audit");
        db.execute("CREATE TABLE " + audit + " (seq bigserial PRIMARY KEY, token bigint NOT NULL)");
        try {
            List<Long> tokens = LongStream.rangeClosed(1, 32).boxed().collect(Collectors.toCollection(ArrayList::new));
            Collections.shuffle(tokens, new java.util.Random(7));
            List<Throwable> rejections = new CopyOnWriteArrayList<>();
            Flux<Long> writers = Flux.fromIterable(tokens).flatMap(token -> {
                TestLease lease = new TestLease("invoice:42", token, "owner-" + token);
                FencedWrite write = invoice(42, "BY-" + token, token);
                // The fenced write and its audit row commit together, or not at all.
                return Flux.usingWhen(db.connections.create(),
                                c -> Flux.usingWhen(Mono.from(c.beginTransaction()).thenReturn(c),
                                        tx -> write.update(tx, lease).then(insertAudit(tx, audit, token)).thenReturn(token),
                                        Connection::commitTransaction,
                                        (tx, e) -> tx.rollbackTransaction(),
                                        Connection::rollbackTransaction),
                                Connection::close)
                        .onErrorResume(e -> {
                            rejections.add(e);
                            return Mono.empty();
                        });
            }, 32);
            List<Long> accepted = writers.collectList().block(BOUND);

            assertThat(rejections).allSatisfy(e -> assertThat(e).isInstanceOf(StaleFencingTokenException.class));
            assertThat(accepted.size() + rejections.size()).isEqualTo(32);
            List<Long> committed = db.query("SELECT token FROM " + audit + " ORDER BY seq").stream()
                    .map(r -> (Long) r.get(0)).collect(Collectors.toList());
            assertThat(committed).containsExactlyInAnyOrderElementsOf(accepted);
            assertThat(committed).isSorted();
            long newest = Collections.max(committed);
            assertThat(newest).isEqualTo(32);
            assertThat(row(42)).containsExactly("BY-32", 32L, 32L, "owner-32");
        } finally {
            db.execute("DROP TABLE IF EXISTS " + audit);
        }
    }

    private static Mono<Void> insertAudit(Connection c, String audit, long token) {
        return Flux.from(c.createStatement("INSERT INTO " + audit + " (token) VALUES ($1)").bind(0, token).execute())
                .flatMap(io.r2dbc.spi.Result::getRowsUpdated)
                .then();
    }

    @Test
    void writesAreObservations() {
        io.micrometer.observation.tck.TestObservationRegistry observations = io.micrometer.observation.tck.TestObservationRegistry.create();
        StepVerifier.create(invoice(42, "PAID", 1).observe(observations).update(db.connections, new TestLease("invoice:42", 9, "b")))
                .expectNext(1L).verifyComplete();
        StepVerifier.create(invoice(42, "VOID", 0).observe(observations).update(db.connections, new TestLease("invoice:42", 8, "a")))
                .verifyError(StaleFencingTokenException.class);
        io.micrometer.observation.tck.TestObservationRegistryAssert.assertThat(observations)
                .hasNumberOfObservationsWithNameEqualTo("fenced.write", 2)
                .hasAnObservationWithAKeyValue("outcome", "written")
                .hasAnObservationWithAKeyValue("outcome", "stale");
    }
}
