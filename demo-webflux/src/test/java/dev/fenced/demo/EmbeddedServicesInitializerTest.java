package dev.fenced.demo;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import org.springframework.mock.env.MockEnvironment;

final class EmbeddedServicesInitializerTest {

    @Test
    void startsBothWhenNothingIsConfigured() {
        assertThat(EmbeddedServicesInitializer.needs(new MockEnvironment()))
                .isEqualTo(new EmbeddedServicesInitializer.Needs(true, true, null));
    }

    @Test
    void usesConfiguredServers() {
        MockEnvironment environment = new MockEnvironment()
                .withProperty("spring.data.redis.host", "redis.example")
                .withProperty("spring.r2dbc.url", "r2dbc:postgresql://db.example/app");
        assertThat(EmbeddedServicesInitializer.needs(environment))
                .isEqualTo(new EmbeddedServicesInitializer.Needs(false, false, null));
        assertThat(EmbeddedServicesInitializer.needs(new MockEnvironment().withProperty("fenced.redis-uri", "redis://h:1")))
                .isEqualTo(new EmbeddedServicesInitializer.Needs(false, true, null));
    }

    @Test
    void turnsTheProjectsPostgresVariableIntoAnR2dbcUrl() {
        MockEnvironment environment = new MockEnvironment()
                .withProperty("FENCED_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test");
        assertThat(EmbeddedServicesInitializer.needs(environment))
                .isEqualTo(new EmbeddedServicesInitializer.Needs(true, false, "r2dbc:postgresql://postgres@127.0.0.1:5432/test"));
    }

    @Test
    void neverStartsAnythingWhenTurnedOff() {
        assertThat(EmbeddedServicesInitializer.needs(new MockEnvironment().withProperty("fenced.embedded", "never")))
                .isEqualTo(new EmbeddedServicesInitializer.Needs(false, false, null));
    }
}
