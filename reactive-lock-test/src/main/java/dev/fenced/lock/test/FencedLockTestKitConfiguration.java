package dev.fenced.lock.test;

import dev.fenced.lock.FencedLockClient;
import java.time.Duration;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.core.env.Environment;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * Puts the test kit in a Spring Boot test in place of the Redis client: import it and the application's
 * {@link FencedLockClient} is the kit's in-memory one (the starter's auto-configured client backs off), and the
 * {@link FencedLockTestKit} bean gives the test its controls.
 *
 * <pre>{@code
 * @SpringBootTest
 * @Import(FencedLockTestKitConfiguration.class)
 * class InvoiceControllerTest {
 *     @Autowired FencedLockTestKit locks;
 *
 *     @Test
 *     void aLostLeaseAbortsTheSettlement() {
 *         ... locks.loseLease("invoice:42", LossReason.NOT_HELD) ...
 *     }
 * }
 * }</pre>
 *
 * <p>The kit runs in real time on a scheduler thread of its own (disposed with the context), so web and
 * repository tests behave as in production; for virtual-time tests, create a kit with
 * {@link FencedLockTestKit#create(Scheduler)} instead. It takes {@code fenced.lease-time},
 * {@code fenced.renewal-period} and {@code fenced.max-wait} from the environment, as the starter does, with the
 * same defaults.
 */
@TestConfiguration(proxyBeanMethods = false)
public class FencedLockTestKitConfiguration implements DisposableBean {

    private final Scheduler clock = Schedulers.newSingle("fenced-test-kit", true);

    /** Creates the configuration; Spring calls this. */
    public FencedLockTestKitConfiguration() {
    }

    /**
     * The test kit, configured from {@code fenced.*} settings.
     *
     * @param environment the test's environment
     * @return the kit; closed with the context
     */
    @Bean(destroyMethod = "close")
    public FencedLockTestKit fencedLockTestKit(Environment environment) {
        Binder binder = Binder.get(environment);
        FencedLockTestKit.Builder builder = FencedLockTestKit.builder(clock);
        binder.bind("fenced.lease-time", Duration.class).ifBound(builder::leaseTime);
        binder.bind("fenced.renewal-period", Duration.class).ifBound(builder::renewalPeriod);
        binder.bind("fenced.max-wait", Duration.class).ifBound(builder::maxWait);
        return builder.build();
    }

    /**
     * The kit's client, as the application's lock client.
     *
     * @param kit the test kit
     * @return its client; the kit closes it
     */
    @Bean(destroyMethod = "")
    public FencedLockClient fencedLockTestClient(FencedLockTestKit kit) {
        return kit.client();
    }

    /** Stops the kit's scheduler thread, after the kit has closed. */
    @Override
    public void destroy() {
        clock.dispose();
    }
}
