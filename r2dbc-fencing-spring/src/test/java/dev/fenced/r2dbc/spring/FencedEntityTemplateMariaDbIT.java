package dev.fenced.r2dbc.spring;

import dev.fenced.testservices.MariaDbServer;
import dev.fenced.testservices.MariaDbServerExtension;
import org.junit.jupiter.api.extension.ExtendWith;

/** Fenced entity writes on MariaDB. */
@ExtendWith(MariaDbServerExtension.class)
class FencedEntityTemplateMariaDbIT extends FencedEntityTemplateContract {

    FencedEntityTemplateMariaDbIT(MariaDbServer server) {
        super(server.r2dbcUrl());
    }
}
