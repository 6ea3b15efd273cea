package dev.fenced.r2dbc;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.StaleFencingTokenException;
import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.IsolationLevel;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.Test;
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

    /** The guarded writes, and the multi-row update of one stale row beside a fresh one (its refusal rethrown). */
    enum Write { UPDATE, CLAIM, STRICT_UPDATE, UPDATE_ALL }

    private Mono<?> write(Write kind, Connection connection, TestLease lease) {
        return switch (kind) {
            case UPDATE -> invoice(7, "STALE", 2).update(connection, lease);
            case CLAIM -> invoice(7, "STALE", 2).claim(connection, lease, r -> r.get("status", String.class));
            case STRICT_UPDATE -> invoice(7, "STALE", 2).rule(FencingRule.STRICTLY_NEWER).update(connection, lease);
            case UPDATE_ALL -> FencedWrite.updateAll(connection, java.util.List.of(
                            new FencedWrite.Item(invoice(7, "STALE", 2), lease),
                            new FencedWrite.Item(invoice(42, "FRESH", 3), new TestLease("invoice:42", 1, "fresh"))))
                    .flatMap(outcomes -> outcomes.get(0).refusal() != null ? Mono.error(outcomes.get(0).refusal())
                            : Mono.just(outcomes.get(0).rowsUpdated()));
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

    /**
     * A refusal reports the stored token, not the snapshot's: the stale transaction's snapshot shows 150, a newer
     * holder commits 200, the stale (100) write is refused. At {@code REPEATABLE READ} and {@code SERIALIZABLE} every
     * read of the transaction, {@code FOR KEY SHARE} too, shows 150, so the refusal is the typed conflict (retry);
     * never stale with 150, which the plain read reported before (the floor then raised to 150 while storage holds
     * 200). At {@code READ COMMITTED}, stale with 200.
     */
    @ParameterizedTest
    @EnumSource(Write.class)
    void aRefusalUnderASnapshotReportsTheStoredTokenNotTheSnapshots(Write kind) {
        for (IsolationLevel level : new IsolationLevel[] {IsolationLevel.READ_COMMITTED, IsolationLevel.REPEATABLE_READ,
                IsolationLevel.SERIALIZABLE}) {
            db.execute("DELETE FROM " + table + " WHERE id = 7", "INSERT INTO " + table + " VALUES (7, 'MIDDLE', 1, 150, 'mid')");
            TestLease stale = new TestLease("invoice:7", 100, "old");
            Connection transaction = db.readFirstIn(level, "SELECT count(*) FROM " + table);
            try {
                db.execute("UPDATE " + table + " SET status = 'NEWER', fencing_token = 200, fencing_owner = 'new' WHERE id = 7");
                StepVerifier.create(write(kind, transaction, stale))
                        .verifyErrorSatisfies(e -> {
                            if (level == IsolationLevel.READ_COMMITTED) {
                                assertThat(e).isExactlyInstanceOf(StaleFencingTokenException.class);
                                assertThat(((StaleFencingTokenException) e).storedToken()).isEqualTo(200);
                                assertThat(stale.reportedNewerToken).hasValue(200);
                            } else {
                                // FOR KEY SHARE returns the snapshot's version (150) here, without a serialization failure.
                                assertThat(e).as(level.asSql()).isExactlyInstanceOf(FencedWriteConflictException.class)
                                        .hasMessage("The fenced write to " + table + " (id = 7) under lock 'invoice:7' "
                                                + "conflicted with a concurrent transaction (the write was refused, and the row changed "
                                                + "after this transaction's snapshot at " + isolation(level) + ", so the "
                                                + "token stored now cannot be read in it); nothing of it was accepted: roll "
                                                + "the transaction back and retry it");
                                assertThat(((FencedWriteConflictException) e).sqlState()).isNull();
                                assertThat(stale.reportedNewerToken).as(level.asSql()).hasValue(-1);
                            }
                        });
            } finally {
                TestDatabase.rollBackAndClose(transaction);
            }
        }
    }

    /**
     * At {@code REPEATABLE READ} and {@code SERIALIZABLE}, a refusal of a row unchanged since the snapshot is stale
     * with the stored token (150, the lease told), and the check that tells it ({@code FOR SHARE} in a savepoint)
     * leaves no lock that the valid holder's {@code UPDATE} would wait for while the refused transaction stays open:
     * {@code FOR NO KEY UPDATE NOWAIT}, the lock of that {@code UPDATE}, is granted at once.
     */
    @ParameterizedTest
    @EnumSource(Write.class)
    void aRefusalOfAnUnchangedRowUnderASnapshotIsStaleAndLeavesNoLockTheValidHolderWaitsFor(Write kind) {
        for (IsolationLevel level : new IsolationLevel[] {IsolationLevel.REPEATABLE_READ, IsolationLevel.SERIALIZABLE}) {
            db.execute("DELETE FROM " + table + " WHERE id = 7", "INSERT INTO " + table + " VALUES (7, 'NEWER', 1, 150, 'mid')");
            TestLease stale = new TestLease("invoice:7", 100, "old");
            Connection transaction = db.readFirstIn(level, "SELECT count(*) FROM " + table);
            try {
                StepVerifier.create(write(kind, transaction, stale))
                        .verifyErrorSatisfies(e -> {
                            assertThat(e).as(level.asSql()).isExactlyInstanceOf(StaleFencingTokenException.class);
                            assertThat(((StaleFencingTokenException) e).storedToken()).isEqualTo(150);
                        });
                assertThat(stale.reportedNewerToken).hasValue(150);
                db.execute("SELECT id FROM " + table + " WHERE id = 7 FOR NO KEY UPDATE NOWAIT");
            } finally {
                TestDatabase.rollBackAndClose(transaction);
            }
        }
    }

    @Test
    void anItemWhoseRowAnotherItemWroteUnderAKeyTheDatabaseFindsEqualIsNotReportedWritten() {
        String timed = TestDatabase.uniqueName("timed_rows");
        db.execute("CREATE TABLE " + timed + " (at timestamptz PRIMARY KEY, v bigint, fencing_token bigint, fencing_owner text)");
        try {
            db.execute("INSERT INTO " + timed + " (at, v) VALUES ('2026-01-01T00:00:00Z', 0)");
            // One instant at two offsets: two keys to Java, one row to PostgreSQL.
            java.time.OffsetDateTime utc = java.time.OffsetDateTime.parse("2026-01-01T00:00:00Z");
            java.time.OffsetDateTime paris = java.time.OffsetDateTime.parse("2026-01-01T01:00:00+01:00");
            TestLease lease = new TestLease("t:1", 5, "a");
            StepVerifier.create(FencedWrite.updateAll(db.connections, java.util.List.of(
                            new FencedWrite.Item(FencedWrite.into(timed).key("at", utc).set("v", 7L), lease),
                            new FencedWrite.Item(FencedWrite.into(timed).key("at", paris).set("v", 8L), lease))))
                    .verifyErrorSatisfies(e -> assertThat(e).isExactlyInstanceOf(IllegalArgumentException.class)
                            .hasMessageEndingWith("was not written by the statement, yet the row holds its token 5: another "
                                    + "item names the same row under a key the database finds equal; write each row once"));
            // The batch's own transaction rolled back: neither item's values are stored.
            assertThat(db.query("SELECT v, fencing_token FROM " + timed)).containsExactly(java.util.Arrays.asList(0L, null));
        } finally {
            db.execute("DROP TABLE " + timed);
        }
    }
}
