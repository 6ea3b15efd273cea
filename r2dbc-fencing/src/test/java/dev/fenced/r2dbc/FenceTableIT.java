package dev.fenced.r2dbc;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.StaleFencingTokenException;
import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.IsolationLevel;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

/** The fence-table contract on PostgreSQL, and a refusal under a snapshot. */
@ExtendWith(PostgresServerExtension.class)
class FenceTableIT extends FenceTableContract {

    FenceTableIT(PostgresServer server) {
        super(TestDatabase.postgres(server));
    }

    /**
     * The stale transaction's snapshot shows the fence at 150, a newer holder advances it to 200 and commits, the
     * stale (100) advance is refused: at {@code READ COMMITTED} as stale with 200, at the higher levels as the typed
     * conflict or stale with 200; never with the snapshot's 150.
     */
    @Test
    void aRefusedAdvanceUnderASnapshotReportsTheStoredTokenNotTheSnapshots() {
        for (IsolationLevel level : new IsolationLevel[] {IsolationLevel.READ_COMMITTED, IsolationLevel.REPEATABLE_READ,
                IsolationLevel.SERIALIZABLE}) {
            String name = "ledger-" + level.asSql().replace(' ', '-');
            fence.inTransaction(db.connections, new TestLease(name, 150, "mid"), c -> Mono.just(1)).blockLast(Duration.ofSeconds(30));
            TestLease stale = new TestLease(name, 100, "old");
            Connection transaction = db.readFirstIn(level, "SELECT count(*) FROM " + fence.name());
            try {
                fence.inTransaction(db.connections, new TestLease(name, 200, "new"), c -> Mono.just(1)).blockLast(Duration.ofSeconds(30));
                StepVerifier.create(fence.advance(transaction, stale))
                        .verifyErrorSatisfies(e -> {
                            if (level == IsolationLevel.READ_COMMITTED || e instanceof StaleFencingTokenException) {
                                assertThat(e).as(level.asSql()).isExactlyInstanceOf(StaleFencingTokenException.class);
                                assertThat(((StaleFencingTokenException) e).storedToken()).as(level.asSql()).isEqualTo(200);
                                assertThat(stale.reportedNewerToken).as(level.asSql()).hasValue(200);
                            } else {
                                assertThat(e).as(level.asSql()).isExactlyInstanceOf(FencedWriteConflictException.class);
                                assertThat(((FencedWriteConflictException) e).sqlState()).isEqualTo("40001");
                            }
                        });
            } finally {
                TestDatabase.rollBackAndClose(transaction);
            }
        }
    }
}
