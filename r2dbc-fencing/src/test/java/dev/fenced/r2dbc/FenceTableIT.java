package dev.fenced.r2dbc;

import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import org.junit.jupiter.api.extension.ExtendWith;

/** The fence-table contract on PostgreSQL. */
@ExtendWith(PostgresServerExtension.class)
class FenceTableIT extends FenceTableContract {

    FenceTableIT(PostgresServer server) {
        super(TestDatabase.postgres(server));
    }
}
