package dev.fenced.testservices;

import static org.assertj.core.api.Assertions.assertThat;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

@ExtendWith(PostgresServerExtension.class)
final class PostgresServerExtensionIT {

    @Test
    void resolvedServerAnswersSelectOne(PostgresServer server) throws Exception {
        try (Connection connection = DriverManager.getConnection(server.jdbcUrl(), server.username(), server.password());
                Statement statement = connection.createStatement();
                ResultSet result = statement.executeQuery("select 1")) {
            assertThat(result.next()).isTrue();
            assertThat(result.getInt(1)).isEqualTo(1);
            assertThat(connection.getCatalog()).isEqualTo(server.database());
        }
    }

    @Test
    void sourceFollowsTheResolutionOrder(PostgresServer server) {
        String configured = System.getenv(PostgresServerExtension.ENVIRONMENT_VARIABLE);
        if (configured != null && !configured.isBlank()) {
            assertThat(server).isEqualTo(
                    PostgresServer.fromEnvironment(PostgresServerExtension.ENVIRONMENT_VARIABLE, configured));
        } else if (DockerEngine.isAvailable()) {
            assertThat(server.source()).isEqualTo(ServiceSource.TESTCONTAINERS);
        } else {
            assertThat(server.source()).isEqualTo(ServiceSource.EMBEDDED);
            assertThat(server.host()).isEqualTo("127.0.0.1");
        }
    }

    @Test
    void urlsNameTheSameServer(PostgresServer server) {
        String address = server.host() + ":" + server.port() + "/" + server.database();
        String credentials = server.password().isEmpty() ? server.username() : server.username() + ":" + server.password();
        assertThat(server.jdbcUrl()).isEqualTo("jdbc:postgresql://" + address);
        assertThat(server.r2dbcUrl()).isEqualTo("r2dbc:postgresql://" + credentials + "@" + address);
    }

    @Test
    void everyResolutionReturnsTheSameInstance(PostgresServer first, PostgresServer second) {
        assertThat(first).isSameAs(second).isSameAs(PostgresServerExtension.server());
    }
}
