package dev.fenced.r2dbc;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.PostgresLeaseTable;
import dev.fenced.testservices.MariaDbServer;
import dev.fenced.testservices.MariaDbServerExtension;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

/** The lease check is PostgreSQL's: on MariaDB a write or fence that asks for it fails before it writes. */
@ExtendWith(MariaDbServerExtension.class)
class LeaseCheckMariaDbIT {

    private static final Duration BOUND = Duration.ofSeconds(30);

    private final TestDatabase db;
    private final TestLease lease = new TestLease("invoice:42", 7, "owner-a");
    private String table;
    private FenceTable fence;

    LeaseCheckMariaDbIT(MariaDbServer server) {
        this.db = TestDatabase.mariaDb(server);
    }

    @BeforeEach
    void setUp() {
        table = TestDatabase.uniqueName("invoices");
        db.execute("CREATE TABLE " + table + " (id bigint PRIMARY KEY, status text NOT NULL, fencing_token bigint, "
                + "fencing_owner text)", "INSERT INTO " + table + " (id, status) VALUES (42, 'OPEN')");
        fence = FenceTable.named(TestDatabase.uniqueName("fence"));
        fence.create(db.connections).block(BOUND);
    }

    @AfterEach
    void tearDown() {
        db.execute("DROP TABLE IF EXISTS " + table, "DROP TABLE IF EXISTS " + fence.name());
        db.close();
    }

    private String refusal(String what) {
        return what + " checks its lease in lease table fenced_lease (checkLease), which runs on PostgreSQL only; "
                + "this connection is to MariaDB";
    }

    private List<Object> row() {
        return db.query("SELECT status, fencing_token, fencing_owner FROM " + table + " WHERE id = 42").get(0);
    }

    @Test
    void aCheckedWriteFailsBeforeItWrites() {
        FencedWrite checked = FencedWrite.into(table).key("id", 42).set("status", "PAID")
                .checkLease(PostgresLeaseTable.defaultTable());
        StepVerifier.create(checked.update(db.connections, lease))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(IllegalStateException.class)
                        .hasMessage(refusal("A fenced write of " + table)));
        StepVerifier.create(checked.upsert(db.connections, lease)).verifyError(IllegalStateException.class);
        // Also on a connection the caller holds in a transaction: the dialect is refused, not skipped.
        StepVerifier.create(Mono.usingWhen(db.connections.create(),
                        c -> Mono.from(c.beginTransaction()).then(checked.update(c, lease)), Connection::close))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(IllegalStateException.class)
                        .hasMessage(refusal("A fenced write of " + table)));
        assertThat(row()).containsExactly("OPEN", null, null);
    }

    @Test
    void aCheckedFenceFailsBeforeItAdvances() {
        AtomicInteger ran = new AtomicInteger();
        StepVerifier.create(fence.checkLease(PostgresLeaseTable.defaultTable())
                        .inTransaction(db.connections, lease, c -> Mono.fromRunnable(ran::incrementAndGet)))
                .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(IllegalStateException.class)
                        .hasMessage(refusal("A fence advance of " + fence.name())));
        assertThat(ran).hasValue(0);
        assertThat(db.query("SELECT last_token FROM " + fence.name())).isEmpty();
    }
}
