package dev.fenced.r2dbc;

import dev.fenced.testservices.MariaDbServer;
import dev.fenced.testservices.MariaDbServerExtension;
import org.junit.jupiter.api.extension.ExtendWith;

/** The fenced-write contract on MariaDB. */
@ExtendWith(MariaDbServerExtension.class)
class FencedWriteMariaDbIT extends FencedWriteContract {

    FencedWriteMariaDbIT(MariaDbServer server) {
        super(TestDatabase.mariaDb(server));
    }
}
