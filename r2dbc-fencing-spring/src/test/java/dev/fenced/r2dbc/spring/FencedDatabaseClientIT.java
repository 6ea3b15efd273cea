package dev.fenced.r2dbc.spring;

import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import org.junit.jupiter.api.extension.ExtendWith;

/** Fenced writes through a DatabaseClient on PostgreSQL. */
@ExtendWith(PostgresServerExtension.class)
class FencedDatabaseClientIT extends FencedDatabaseClientContract {

    FencedDatabaseClientIT(PostgresServer server) {
        super(server.r2dbcUrl());
    }
}
