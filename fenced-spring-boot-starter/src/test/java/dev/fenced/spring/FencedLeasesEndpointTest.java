package dev.fenced.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.test.FencedLockTestKit;
import dev.fenced.lock.test.FencedLockTestKitConfiguration;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import tools.jackson.databind.json.JsonMapper;

/** The {@code fenced} Actuator endpoint, on the test kit's client, which also shows the kit as a drop-in bean. */
class FencedLeasesEndpointTest {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(FencedLockAutoConfiguration.class))
            .withUserConfiguration(FencedLockTestKitConfiguration.class);

    @Test
    void theTestKitReplacesTheAutoConfiguredClient() {
        runner.run(context -> {
            assertThat(context).hasSingleBean(FencedLockClient.class).doesNotHaveBean(FencedRedisConnection.class);
            assertThat(context.getBean(FencedLockClient.class)).isSameAs(context.getBean(FencedLockTestKit.class).client());
        });
    }

    @Test
    void theEndpointListsHeldLeasesWithTokenAndRemainingValidity() {
        runner.withPropertyValues("management.endpoints.web.exposure.include=fenced", "fenced.lease-time=20s").run(context -> {
            FencedLockClient client = context.getBean(FencedLockClient.class);
            FencedLeasesEndpoint endpoint = context.getBean(FencedLeasesEndpoint.class);
            assertThat(endpoint.leases().leases()).isEmpty();

            FencedLease second = client.acquire("order:2").block(Duration.ofSeconds(5));
            FencedLease first = client.acquire("order:1").block(Duration.ofSeconds(5));
            List<FencedLeasesEndpoint.HeldLease> leases = endpoint.leases().leases();
            assertThat(leases).extracting(FencedLeasesEndpoint.HeldLease::name, FencedLeasesEndpoint.HeldLease::token)
                    .containsExactly(org.assertj.core.groups.Tuple.tuple("order:1", first.token()),
                            org.assertj.core.groups.Tuple.tuple("order:2", second.token()));
            assertThat(leases).allSatisfy(lease -> assertThat(lease.remainingValidityMillis()).isBetween(1L, 20_000L));

            first.release().block(Duration.ofSeconds(5));
            assertThat(endpoint.leases().leases()).extracting(FencedLeasesEndpoint.HeldLease::name).containsExactly("order:2");
        });
    }

    @Test
    void theAnswerIsTheJsonTheReadmeShows() {
        FencedLeasesEndpoint.HeldLeases answer = new FencedLeasesEndpoint.HeldLeases(
                List.of(new FencedLeasesEndpoint.HeldLease("invoice:42", 17, 8712)));
        JsonMapper json = JsonMapper.builder().build();
        assertThat(json.readTree(json.writeValueAsString(answer))).isEqualTo(json.readTree(
                "{\"leases\":[{\"name\":\"invoice:42\",\"token\":17,\"remainingValidityMillis\":8712}]}"));
    }

    @Test
    void theEndpointIsThereOnlyWhenExposed() {
        runner.run(context -> assertThat(context).doesNotHaveBean(FencedLeasesEndpoint.class));
    }

    @Test
    void aClientNotBuiltByTheLibraryHasNoLeasesToList() {
        FencedLockClient foreign = (FencedLockClient) java.lang.reflect.Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {FencedLockClient.class}, (proxy, method, args) -> {
                    throw new UnsupportedOperationException(method.getName());
                });
        new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(FencedLockAutoConfiguration.class))
                .withBean(FencedLockClient.class, () -> foreign, definition -> definition.setDestroyMethodName(""))
                .withPropertyValues("management.endpoints.web.exposure.include=fenced")
                .run(context -> assertThat(context.getBean(FencedLeasesEndpoint.class).leases().leases()).isEmpty());
    }
}
