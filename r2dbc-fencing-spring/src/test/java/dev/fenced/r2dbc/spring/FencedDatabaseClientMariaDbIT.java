package dev.fenced.r2dbc.spring;

import dev.fenced.testservices.MariaDbServer;
import dev.fenced.testservices.MariaDbServerExtension;
import org.junit.jupiter.api.extension.ExtendWith;

/** Fenced writes through a DatabaseClient on MariaDB. */
@ExtendWith(MariaDbServerExtension.class)
class FencedDatabaseClientMariaDbIT extends FencedDatabaseClientContract {

    FencedDatabaseClientMariaDbIT(MariaDbServer server) {
        super(server.r2dbcUrl());
    }
}
