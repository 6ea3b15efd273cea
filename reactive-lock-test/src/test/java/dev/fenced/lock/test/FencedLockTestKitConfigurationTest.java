package dev.fenced.lock.test;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.LossReason;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import reactor.test.StepVerifier;

/** The test kit as a drop-in bean of a Spring test. */
class FencedLockTestKitConfigurationTest {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withUserConfiguration(FencedLockTestKitConfiguration.class);

    @Test
    void theApplicationsClientIsTheKitsAndTheKitControlsIt() {
        runner.run(context -> {
            FencedLockTestKit kit = context.getBean(FencedLockTestKit.class);
            FencedLockClient client = context.getBean(FencedLockClient.class);
            assertThat(client).isSameAs(kit.client());
            FencedLease lease = client.acquire("invoice:42").block(Duration.ofSeconds(5));
            assertThat(lease.token()).isEqualTo(1);
            assertThat(lease.leaseTime()).isEqualTo(Duration.ofSeconds(30));
            assertThat(kit.holder("invoice:42")).contains(lease.ownerId() + ":1");

            kit.loseLease("invoice:42", LossReason.NOT_HELD);
            lease.lost().as(StepVerifier::create)
                    .assertNext(loss -> assertThat(loss).isInstanceOf(LeaseLostException.class)
                            .extracting(LeaseLostException::reason).isEqualTo(LossReason.NOT_HELD))
                    .verifyComplete();
            assertThat(kit.heldLeases()).isEmpty();
        });
    }

    @Test
    void fencedSettingsOfTheEnvironmentApply() {
        runner.withPropertyValues("fenced.lease-time=5s", "fenced.max-wait=0s").run(context -> {
            FencedLockClient client = context.getBean(FencedLockClient.class);
            FencedLease lease = client.acquire("invoice:7").block(Duration.ofSeconds(5));
            assertThat(lease.leaseTime()).isEqualTo(Duration.ofSeconds(5));
            // A maximum wait of zero makes one attempt: a second acquire of the held lock is empty at once.
            client.acquire("invoice:7").as(StepVerifier::create).verifyComplete();
        });
    }
}
