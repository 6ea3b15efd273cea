package dev.fenced.testservices;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

final class PostgresServerTest {

    private static final String VARIABLE = "FENCED_POSTGRES_URL";

    @Test
    void readsUserHostPortAndDatabaseWithoutPassword() {
        PostgresServer server = PostgresServer.fromEnvironment(VARIABLE, "postgresql://postgres@127.0.0.1:5432/test");

        assertThat(server.username()).isEqualTo("postgres");
        assertThat(server.password()).isEmpty();
        assertThat(server.host()).isEqualTo("127.0.0.1");
        assertThat(server.port()).isEqualTo(5432);
        assertThat(server.database()).isEqualTo("test");
        assertThat(server.source()).isEqualTo(ServiceSource.ENVIRONMENT);
        assertThat(server.jdbcUrl()).isEqualTo("jdbc:postgresql://127.0.0.1:5432/test");
        assertThat(server.r2dbcUrl()).isEqualTo("r2dbc:postgresql://postgres@127.0.0.1:5432/test");
    }

    @Test
    void readsAPercentEncodedPasswordAndPutsItInTheR2dbcUrlOnly() {
        PostgresServer server = PostgresServer.fromEnvironment(VARIABLE, "postgres://app:p%40ss+w%3Ard@db.test:6543/locks");

        assertThat(server.username()).isEqualTo("app");
        assertThat(server.password()).isEqualTo("p@ss+w:rd");
        assertThat(server.port()).isEqualTo(6543);
        assertThat(server.jdbcUrl()).isEqualTo("jdbc:postgresql://db.test:6543/locks");
        assertThat(server.r2dbcUrl()).isEqualTo("r2dbc:postgresql://app:p%40ss%2Bw%3Ard@db.test:6543/locks");
    }

    @Test
    void defaultsToPort5432() {
        assertThat(PostgresServer.fromEnvironment(VARIABLE, "postgresql://postgres@localhost/test").port())
                .isEqualTo(5432);
    }

    @Test
    void writesIpv6HostsWithBrackets() {
        PostgresServer server = PostgresServer.fromEnvironment(VARIABLE, "postgresql://postgres@[::1]:5432/test");

        assertThat(server.host()).isEqualTo("::1");
        assertThat(server.jdbcUrl()).isEqualTo("jdbc:postgresql://[::1]:5432/test");
    }

    @ParameterizedTest
    @ValueSource(strings = {
        "postgres@127.0.0.1:5432/test", "mysql://root@127.0.0.1:3306/test", "postgresql://127.0.0.1:5432/test",
        "postgresql://:secret@127.0.0.1:5432/test", "postgresql://postgres@127.0.0.1:5432",
        "postgresql://postgres@127.0.0.1:5432/", "postgresql://postgres@127.0.0.1:5432/test/extra",
        "postgresql://postgres@127.0.0.1:5432/test?sslmode=disable", "postgresql://postgres@127.0.0.1:99999/test"
    })
    void rejectsAnythingButTheDocumentedForm(String value) {
        assertThatThrownBy(() -> PostgresServer.fromEnvironment(VARIABLE, value))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("FENCED_POSTGRES_URL must be postgresql://user[:password]@host[:port]/database (no options)");
    }

    @Test
    void toStringLeavesThePasswordOut() {
        PostgresServer server = new PostgresServer("127.0.0.1", 5432, "test", "app", "secret", ServiceSource.ENVIRONMENT);

        assertThat(server).hasToString("postgresql://app@127.0.0.1:5432/test (ENVIRONMENT)");
    }
}
