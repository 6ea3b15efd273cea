package dev.fenced.r2dbc.spring;

import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import org.junit.jupiter.api.extension.ExtendWith;

/** Fenced entity writes on PostgreSQL. */
@ExtendWith(PostgresServerExtension.class)
class FencedEntityTemplateIT extends FencedEntityTemplateContract {

    FencedEntityTemplateIT(PostgresServer server) {
        super(server.r2dbcUrl());
    }
}
