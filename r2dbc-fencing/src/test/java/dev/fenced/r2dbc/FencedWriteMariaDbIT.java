package dev.fenced.r2dbc;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.testservices.MariaDbServer;
import dev.fenced.testservices.MariaDbServerExtension;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.IsolationLevel;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.test.StepVerifier;

/** The fenced-write contract on MariaDB, and what InnoDB's {@code REPEATABLE READ} snapshot adds to it. */
@ExtendWith(MariaDbServerExtension.class)
class FencedWriteMariaDbIT extends FencedWriteContract {

    FencedWriteMariaDbIT(MariaDbServer server) {
        super(TestDatabase.mariaDb(server));
    }

    @Test
    void aClaimThatChangesNothingReturnsTheRowAsItIsNowNotTheSnapshot() {
        TestLease lease = new TestLease("invoice:42", 100, "old");
        StepVerifier.create(invoice(42, "OPEN", 1).update(db.connections, lease)).expectNext(1L).verifyComplete();
        Connection transaction = db.readFirstIn(IsolationLevel.REPEATABLE_READ, "SELECT status FROM " + table + " WHERE id = 42");
        try {
            // The same lease, in another transaction, writes the very values the claim will set.
            StepVerifier.create(invoice(42, "PAID", 2).update(db.connections, lease)).expectNext(1L).verifyComplete();
            StepVerifier.create(invoice(42, "PAID", 2).claim(transaction, lease,
                            r -> List.of(r.get("status", String.class), r.get("amount", Long.class))))
                    .expectNext(List.of("PAID", 2L))
                    .verifyComplete();
        } finally {
            TestDatabase.rollBackAndClose(transaction);
        }
    }
}
