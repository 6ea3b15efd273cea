package dev.fenced.r2dbc;

import dev.fenced.testservices.MariaDbServer;
import dev.fenced.testservices.MariaDbServerExtension;
import org.junit.jupiter.api.extension.ExtendWith;

/** The fence-table contract on MariaDB. */
@ExtendWith(MariaDbServerExtension.class)
class FenceTableMariaDbIT extends FenceTableContract {

    FenceTableMariaDbIT(MariaDbServer server) {
        super(TestDatabase.mariaDb(server));
    }
}
