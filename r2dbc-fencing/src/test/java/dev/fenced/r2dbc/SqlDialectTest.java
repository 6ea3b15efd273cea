package dev.fenced.r2dbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionMetadata;
import java.lang.reflect.Proxy;
import org.junit.jupiter.api.Test;

/** Which dialect a connection gets, read from its metadata. */
class SqlDialectTest {

    private static Connection to(String product) {
        ConnectionMetadata metadata = (ConnectionMetadata) Proxy.newProxyInstance(SqlDialectTest.class.getClassLoader(),
                new Class<?>[] {ConnectionMetadata.class}, (proxy, method, args) -> product);
        return (Connection) Proxy.newProxyInstance(SqlDialectTest.class.getClassLoader(), new Class<?>[] {Connection.class},
                (proxy, method, args) -> {
                    if (method.getName().equals("getMetadata")) {
                        return metadata;
                    }
                    throw new UnsupportedOperationException(method.getName());
                });
    }

    @Test
    void theProductNameChoosesTheDialect() {
        assertThat(SqlDialect.of(to("PostgreSQL"))).isEqualTo(SqlDialect.POSTGRESQL);
        assertThat(SqlDialect.of(to("MariaDB"))).isEqualTo(SqlDialect.MARIADB);
        assertThat(SqlDialect.of(to("MySQL"))).isEqualTo(SqlDialect.MARIADB);
    }

    @Test
    void anotherDatabaseIsRefusedByName() {
        assertThatThrownBy(() -> SqlDialect.of(to("H2")))
                .isInstanceOf(IllegalStateException.class)
                .hasMessage("Fenced writes support PostgreSQL and MariaDB/MySQL; this connection is to H2");
    }

    @Test
    void schemaQualifiedNamesAreQuotedPartByPart() {
        assertThat(SqlDialect.POSTGRESQL.quote("billing.ledger")).isEqualTo("\"billing\".\"ledger\"");
        assertThat(SqlDialect.MARIADB.quote("billing.ledger")).isEqualTo("`billing`.`ledger`");
    }
}
