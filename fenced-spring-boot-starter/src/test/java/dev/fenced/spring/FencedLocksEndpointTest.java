package dev.fenced.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.ForceReleaseResult;
import dev.fenced.lock.LossReason;
import dev.fenced.lock.test.FencedLockTestKitConfiguration;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.springframework.boot.actuate.autoconfigure.endpoint.EndpointAutoConfiguration;
import org.springframework.boot.actuate.autoconfigure.endpoint.jmx.JmxEndpointAutoConfiguration;
import org.springframework.boot.actuate.endpoint.EndpointId;
import org.springframework.boot.actuate.endpoint.InvalidEndpointRequestException;
import org.springframework.boot.actuate.endpoint.OperationType;
import org.springframework.boot.actuate.endpoint.jmx.ExposableJmxEndpoint;
import org.springframework.boot.actuate.endpoint.jmx.JmxEndpointsSupplier;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.autoconfigure.jmx.JmxAutoConfiguration;
import org.springframework.boot.test.context.assertj.AssertableApplicationContext;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import reactor.test.StepVerifier;
import tools.jackson.databind.json.JsonMapper;

/**
 * The {@code fencedlocks} Actuator endpoint on the test kit's client, and its access: read operations by default,
 * force-release only when the endpoint's access is set to unrestricted (checked through Actuator's own endpoint
 * discovery, over JMX, which applies the access settings as the web does).
 */
class FencedLocksEndpointTest {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(FencedLockAutoConfiguration.class))
            .withUserConfiguration(FencedLockTestKitConfiguration.class)
            .withPropertyValues("management.endpoints.web.exposure.include=fencedlocks");

    private final ApplicationContextRunner discovered = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(JmxAutoConfiguration.class, EndpointAutoConfiguration.class,
                    JmxEndpointAutoConfiguration.class, FencedLockAutoConfiguration.class))
            .withUserConfiguration(FencedLockTestKitConfiguration.class)
            // As SpringApplication does, so that access values are read as an application reads them ("unrestricted").
            .withInitializer(context -> context.getEnvironment().setConversionService(
                    (org.springframework.core.convert.support.ConfigurableConversionService)
                            org.springframework.boot.convert.ApplicationConversionService.getSharedInstance()))
            .withPropertyValues("spring.jmx.enabled=true", "spring.jmx.unique-names=true",
                    "management.endpoints.jmx.exposure.include=fencedlocks");

    private static Set<OperationType> operations(AssertableApplicationContext context) {
        ExposableJmxEndpoint endpoint = context.getBean(JmxEndpointsSupplier.class).getEndpoints().stream()
                .filter(e -> e.getEndpointId().equals(EndpointId.of("fencedlocks")))
                .findFirst().orElseThrow();
        return endpoint.getOperations().stream().map(o -> o.getType()).collect(Collectors.toSet());
    }

    @Test
    void onADefaultInstallTheEndpointOffersOnlyItsReadOperations() {
        discovered.run(context -> assertThat(operations(context)).containsExactly(OperationType.READ));
    }

    @Test
    void forceReleaseExistsOnlyWithUnrestrictedAccess() {
        discovered.withPropertyValues("management.endpoint.fencedlocks.access=unrestricted")
                .run(context -> assertThat(operations(context)).containsExactlyInAnyOrder(OperationType.READ,
                        OperationType.WRITE));
        discovered.withPropertyValues("management.endpoint.fencedlocks.access=unrestricted",
                        "management.endpoints.access.max-permitted=read-only")
                .run(context -> assertThat(operations(context)).as("capped by max-permitted").containsExactly(OperationType.READ));
    }

    /** The documented second way: the global default access alone turns force-release on, without naming fencedlocks. */
    @Test
    void theGlobalDefaultAccessUnrestrictedAloneAlsoOffersForceRelease() {
        discovered.withPropertyValues("management.endpoints.access.default=unrestricted")
                .run(context -> assertThat(operations(context)).containsExactlyInAnyOrder(OperationType.READ,
                        OperationType.WRITE));
    }

    @Test
    void theEndpointIsThereOnlyWhenExposed() {
        new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(FencedLockAutoConfiguration.class))
                .withUserConfiguration(FencedLockTestKitConfiguration.class)
                .run(context -> assertThat(context).doesNotHaveBean(FencedLocksEndpoint.class));
    }

    @Test
    void theEndpointListsReadsAndBreaksLocks() {
        runner.withPropertyValues("fenced.lease-time=20s").run(context -> {
            FencedLockClient client = context.getBean(FencedLockClient.class);
            FencedLocksEndpoint endpoint = context.getBean(FencedLocksEndpoint.class);
            FencedLease report = client.acquire("report:daily").block(Duration.ofSeconds(5));
            FencedLease invoice = client.acquire("invoice:42").block(Duration.ofSeconds(5));

            StepVerifier.create(endpoint.locks(null, null))
                    .assertNext(answer -> {
                        assertThat(answer.pattern()).isEqualTo("*");
                        assertThat(answer.truncated()).isFalse();
                        assertThat(answer.locks()).extracting(FencedLocksEndpoint.Lock::name)
                                .containsExactlyInAnyOrder("report:daily", "invoice:42");
                    })
                    .verifyComplete();
            StepVerifier.create(endpoint.locks("invoice:*", 10))
                    .assertNext(answer -> assertThat(answer.locks()).singleElement().satisfies(lock -> {
                        assertThat(lock.token()).isEqualTo(invoice.token());
                        assertThat(lock.remainingMillis()).isBetween(1L, 20_000L);
                    }))
                    .verifyComplete();
            StepVerifier.create(endpoint.locks("*", 1))
                    .assertNext(answer -> {
                        assertThat(answer.locks()).hasSize(1);
                        assertThat(answer.truncated()).isTrue();
                    })
                    .verifyComplete();
            StepVerifier.create(endpoint.lock("report:daily").map(FencedLocksEndpoint.Lock::token))
                    .expectNext(report.token()).verifyComplete();
            StepVerifier.create(endpoint.lock("not-held")).verifyComplete();

            StepVerifier.create(endpoint.forceRelease("report:daily", "ops: report job hung", null))
                    .expectNext(new FencedLocksEndpoint.ForceRelease("report:daily", ForceReleaseResult.Outcome.RELEASED,
                            report.token(), null, "ops: report job hung"))
                    .verifyComplete();
            StepVerifier.create(report.lost()).assertNext(loss -> assertThat(loss.reason()).isEqualTo(LossReason.NOT_HELD))
                    .verifyComplete();
            StepVerifier.create(endpoint.forceRelease("report:daily", "again", report.token()).map(FencedLocksEndpoint.ForceRelease::outcome))
                    .expectNext(ForceReleaseResult.Outcome.NOT_HELD).verifyComplete();
        });
    }

    @Test
    void badArgumentsAreBadRequestsWithTheLibrarysMessage() {
        runner.run(context -> {
            FencedLocksEndpoint endpoint = context.getBean(FencedLocksEndpoint.class);
            StepVerifier.create(endpoint.locks("a{b}", null)).verifyErrorSatisfies(e -> assertThat(e)
                    .isInstanceOf(InvalidEndpointRequestException.class)
                    .hasMessage("Lock name pattern must not contain braces, was 'a{b}'"));
            StepVerifier.create(endpoint.locks("*", 0)).verifyErrorSatisfies(e -> assertThat(e)
                    .isInstanceOf(InvalidEndpointRequestException.class)
                    .hasMessage("limit must be between 1 and 10000, was 0"));
            StepVerifier.create(endpoint.forceRelease("job", " ", null)).verifyErrorSatisfies(e -> assertThat(e)
                    .isInstanceOf(InvalidEndpointRequestException.class)
                    .hasMessage("reason must not be blank: say who breaks the lock and why"));
        });
    }

    @Test
    void theAnswersAreTheJsonTheReadmeShows() {
        JsonMapper json = JsonMapper.builder().build();
        FencedLocksEndpoint.Locks locks = new FencedLocksEndpoint.Locks("invoice:*", List.of(
                new FencedLocksEndpoint.Lock("invoice:42", 1796115928007538L, 8712, "orders@web-1 (pid 4242)", 1)), false);
        assertThat(json.readTree(json.writeValueAsString(locks))).isEqualTo(json.readTree(
                "{\"pattern\":\"invoice:*\",\"locks\":[{\"name\":\"invoice:42\",\"token\":1796115928007538,"
                        + "\"remainingMillis\":8712,\"holderLabel\":\"orders@web-1 (pid 4242)\",\"waiters\":1}],"
                        + "\"truncated\":false}"));
        FencedLocksEndpoint.ForceRelease broken = new FencedLocksEndpoint.ForceRelease("invoice:42",
                ForceReleaseResult.Outcome.RELEASED, 1796115928007538L, "orders@web-1 (pid 4242)", "alice: INC-1234");
        assertThat(json.readTree(json.writeValueAsString(broken))).isEqualTo(json.readTree(
                "{\"name\":\"invoice:42\",\"outcome\":\"RELEASED\",\"token\":1796115928007538,"
                        + "\"holderLabel\":\"orders@web-1 (pid 4242)\",\"reason\":\"alice: INC-1234\"}"));
    }
}
