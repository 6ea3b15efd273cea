package dev.fenced.r2dbc;

import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import org.junit.jupiter.api.extension.ExtendWith;

/** The fenced-write contract on PostgreSQL. */
@ExtendWith(PostgresServerExtension.class)
class FencedWriteIT extends FencedWriteContract {

    FencedWriteIT(PostgresServer server) {
        super(TestDatabase.postgres(server));
    }
}
