package dev.fenced.r2dbc;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.StaleFencingTokenException;
import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.IsolationLevel;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

/**
 * The fenced-write contract on PostgreSQL, and what its {@code REPEATABLE READ} and {@code SERIALIZABLE} snapshots
 * add to it: a row a newer holder inserted after the snapshot is invisible even to a locking read.
 */
@ExtendWith(PostgresServerExtension.class)
class FencedWriteIT extends FencedWriteContract {

    FencedWriteIT(PostgresServer server) {
        super(TestDatabase.postgres(server));
    }

    enum Write { UPDATE, CLAIM, STRICT_UPDATE }

    private Mono<?> write(Write kind, Connection connection, TestLease lease) {
        return switch (kind) {
            case UPDATE -> invoice(7, "STALE", 2).update(connection, lease);
            case CLAIM -> invoice(7, "STALE", 2).claim(connection, lease, r -> r.get("status", String.class));
            case STRICT_UPDATE -> invoice(7, "STALE", 2).rule(FencingRule.STRICTLY_NEWER).update(connection, lease);
        };
    }

    private String invisible(String isolation) {
        return "No row to update in " + table + " (id = 7) (write under lock 'invoice:7'): no row is visible to this "
                + "transaction's snapshot; at " + isolation + " a row another transaction inserted after the snapshot "
                + "is invisible too, so retry in a new transaction to tell";
    }

    private static String isolation(IsolationLevel level) {
        return level == IsolationLevel.SERIALIZABLE ? "serializable" : "repeatable read";
    }

    @ParameterizedTest
    @EnumSource(Write.class)
    void aRowInsertedAfterTheSnapshotIsNotFoundWithTheAmbiguityStated(Write kind) {
        for (IsolationLevel level : new IsolationLevel[] {IsolationLevel.REPEATABLE_READ, IsolationLevel.SERIALIZABLE}) {
            db.execute("DELETE FROM " + table + " WHERE id = 7");
            TestLease stale = new TestLease("invoice:7", 100, "old");
            Connection transaction = db.readFirstIn(level, "SELECT count(*) FROM " + table);
            try {
                db.execute("INSERT INTO " + table + " VALUES (7, 'NEWER', 1, 200, 'new')");
                StepVerifier.create(write(kind, transaction, stale))
                        .verifyErrorSatisfies(e -> assertThat(e).isExactlyInstanceOf(FencedRowNotFoundException.class)
                                .hasMessage(invisible(isolation(level))));
                assertThat(stale.reportedNewerToken).hasValue(-1);
            } finally {
                TestDatabase.rollBackAndClose(transaction);
            }
            // A new transaction tells: its snapshot sees the newer holder's row, and the write is refused as stale.
            Connection retry = db.readFirstIn(level, "SELECT count(*) FROM " + table);
            try {
                StepVerifier.create(write(kind, retry, stale)).verifyError(StaleFencingTokenException.class);
            } finally {
                TestDatabase.rollBackAndClose(retry);
            }
        }
    }

    /**
     * Transaction ids are server-wide: commits of unrelated transactions after the snapshot (another connection
     * writing another table) say nothing about this row, so a truly missing row stays "not found", never a conflict
     * that a caller retrying on conflict would retry forever on a busy server.
     */
    @ParameterizedTest
    @EnumSource(Write.class)
    void aMissingRowUnderUnrelatedCommitsIsNotFoundNeverAConflict(Write kind) {
        db.execute("CREATE TABLE IF NOT EXISTS unrelated_load (n int)");
        for (IsolationLevel level : new IsolationLevel[] {IsolationLevel.REPEATABLE_READ, IsolationLevel.SERIALIZABLE}) {
            db.execute("DELETE FROM " + table + " WHERE id = 7");
            TestLease lease = new TestLease("invoice:7", 100, "old");
            Connection transaction = db.readFirstIn(level, "SELECT count(*) FROM " + table);
            try {
                for (int i = 0; i < 5; i++) {
                    db.execute("INSERT INTO unrelated_load VALUES (" + i + ")");
                }
                StepVerifier.create(write(kind, transaction, lease))
                        .verifyErrorSatisfies(e -> assertThat(e).isExactlyInstanceOf(FencedRowNotFoundException.class)
                                .hasMessage(invisible(isolation(level))));
            } finally {
                TestDatabase.rollBackAndClose(transaction);
            }
        }
    }
}
