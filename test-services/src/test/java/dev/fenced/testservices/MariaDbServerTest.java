package dev.fenced.testservices;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

final class MariaDbServerTest {

    private static final String VARIABLE = "FENCED_MARIADB_URL";

    @Test
    void readsUserHostPortAndDatabaseWithoutPassword() {
        MariaDbServer server = MariaDbServer.fromEnvironment(VARIABLE, "mariadb://root@127.0.0.1:3306/test");

        assertThat(server.username()).isEqualTo("root");
        assertThat(server.password()).isEmpty();
        assertThat(server.host()).isEqualTo("127.0.0.1");
        assertThat(server.port()).isEqualTo(3306);
        assertThat(server.database()).isEqualTo("test");
        assertThat(server.source()).isEqualTo(ServiceSource.ENVIRONMENT);
        assertThat(server.r2dbcUrl()).isEqualTo("r2dbc:mariadb://root@127.0.0.1:3306/test");
    }

    @Test
    void readsAPercentEncodedPasswordAndTheMysqlScheme() {
        MariaDbServer server = MariaDbServer.fromEnvironment(VARIABLE, "mysql://app:p%40ss+w%3Ard@db.test/locks");

        assertThat(server.password()).isEqualTo("p@ss+w:rd");
        assertThat(server.port()).isEqualTo(3306);
        assertThat(server.r2dbcUrl()).isEqualTo("r2dbc:mariadb://app:p%40ss%2Bw%3Ard@db.test:3306/locks");
    }

    @ParameterizedTest
    @ValueSource(strings = {
        "root@127.0.0.1:3306/test", "postgresql://root@127.0.0.1:3306/test", "mariadb://127.0.0.1:3306/test",
        "mariadb://root@127.0.0.1:3306", "mariadb://root@127.0.0.1:3306/test/extra",
        "mariadb://root@127.0.0.1:3306/test?useSsl=false", "mariadb://root@127.0.0.1:99999/test"
    })
    void rejectsAnythingButTheDocumentedForm(String value) {
        assertThatThrownBy(() -> MariaDbServer.fromEnvironment(VARIABLE, value))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("FENCED_MARIADB_URL must be mariadb://user[:password]@host[:port]/database (no options)");
    }

    @Test
    void toStringLeavesThePasswordOut() {
        assertThat(new MariaDbServer("127.0.0.1", 3306, "test", "app", "secret", ServiceSource.ENVIRONMENT))
                .hasToString("mariadb://app@127.0.0.1:3306/test (ENVIRONMENT)");
    }
}
