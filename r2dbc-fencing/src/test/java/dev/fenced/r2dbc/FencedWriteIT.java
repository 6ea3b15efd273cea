package dev.fenced.r2dbc;

import static org.assertj.core.api.Assertions.assertThat;

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

    @ParameterizedTest
    @EnumSource(Write.class)
    void aRowInsertedAfterTheSnapshotIsAConflictNotAMissingRow(Write kind) {
        for (IsolationLevel level : new IsolationLevel[] {IsolationLevel.REPEATABLE_READ, IsolationLevel.SERIALIZABLE}) {
            db.execute("DELETE FROM " + table + " WHERE id = 7");
            TestLease stale = new TestLease("invoice:7", 100, "old");
            Connection transaction = db.readFirstIn(level, "SELECT count(*) FROM " + table);
            try {
                db.execute("INSERT INTO " + table + " VALUES (7, 'NEWER', 1, 200, 'new')");
                String isolation = level == IsolationLevel.SERIALIZABLE ? "serializable" : "repeatable read";
                StepVerifier.create(write(kind, transaction, stale))
                        .verifyErrorSatisfies(e -> {
                            assertThat(e).isInstanceOf(FencedWriteConflictException.class).hasMessage("The fenced write to "
                                    + table + " (id = 7) under lock 'invoice:7' conflicted with a concurrent transaction (no "
                                    + "row is visible, but at " + isolation + " the transaction's snapshot may hide one "
                                    + "committed after it began); nothing of it was accepted: roll the transaction back "
                                    + "and retry it");
                            assertThat(((FencedWriteConflictException) e).sqlState()).isNull();
                        });
                assertThat(stale.reportedNewerToken).hasValue(-1);
            } finally {
                TestDatabase.rollBackAndClose(transaction);
            }
        }
    }
}
