package dev.fenced.lock.internal.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import io.r2dbc.spi.R2dbcTransientResourceException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Which failures of a shared statement send its members to run again alone. */
class PostgresErrorsTest {

    @ParameterizedTest
    @ValueSource(strings = {"40001", "55P03", "40P01"})
    void aStatementRolledBackByAWaitRunsItsMembersAgainAlone(String sqlState) {
        assertThat(PostgresErrors.rolledBackByWait(new R2dbcTransientResourceException("rolled back", sqlState))).isTrue();
    }

    @ParameterizedTest
    @ValueSource(strings = {"23505", "08006", "42P01", "57014"})
    void otherFailuresFailEveryMember(String sqlState) {
        assertThat(PostgresErrors.rolledBackByWait(new R2dbcTransientResourceException("failed", sqlState))).isFalse();
    }

    @Test
    void aFailureWithoutSqlStateFailsEveryMember() {
        assertThat(PostgresErrors.rolledBackByWait(new IllegalStateException("no reply"))).isFalse();
    }
}
