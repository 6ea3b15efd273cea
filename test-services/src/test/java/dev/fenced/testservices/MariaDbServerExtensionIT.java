package dev.fenced.testservices;

import static org.assertj.core.api.Assertions.assertThat;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

@ExtendWith(MariaDbServerExtension.class)
final class MariaDbServerExtensionIT {

    @Test
    void resolvedServerAnswersAsMariaDbWithItsDatabase(MariaDbServer server) throws Exception {
        String url = "jdbc:mariadb://" + Urls.authority(server.host(), server.port()) + "/" + server.database();
        try (Connection connection = DriverManager.getConnection(url, server.username(), server.password());
                Statement statement = connection.createStatement();
                ResultSet result = statement.executeQuery("SELECT VERSION(), DATABASE()")) {
            assertThat(result.next()).isTrue();
            assertThat(result.getString(1)).containsIgnoringCase("mariadb");
            assertThat(result.getString(2)).isEqualTo(server.database());
        }
    }

    @Test
    void sourceFollowsTheResolutionOrder(MariaDbServer server) {
        String configured = System.getenv(MariaDbServerExtension.ENVIRONMENT_VARIABLE);
        if (configured != null && !configured.isBlank()) {
            assertThat(server).isEqualTo(
                    MariaDbServer.fromEnvironment(MariaDbServerExtension.ENVIRONMENT_VARIABLE, configured));
        } else if (DockerEngine.isAvailable()) {
            assertThat(server.source()).isEqualTo(ServiceSource.TESTCONTAINERS);
        } else {
            assertThat(server.source()).isEqualTo(ServiceSource.EMBEDDED);
            assertThat(server.host()).isEqualTo("127.0.0.1");
        }
    }

    @Test
    void everyResolutionReturnsTheSameInstance(MariaDbServer first, MariaDbServer second) {
        assertThat(first).isSameAs(second).isSameAs(MariaDbServerExtension.server());
    }
}
