package dev.fenced.lock.internal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.LossReason;
import dev.fenced.lock.internal.memory.InMemoryLeaseStore;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * On which threads leases and losses arrive: user code triggered by a loss (a cancelled {@code withLease}, its
 * error handling) never runs on the thread that renews, and an emission scheduler moves both where the
 * application wants them. Real schedulers, real (short) time.
 */
class LossDeliveryTest {

    private final Scheduler renewal = Schedulers.newSingle("fenced-test-renewal", true);
    private final Scheduler app = Schedulers.newSingle("app-thread", true);
    private final InMemoryLeaseStore memory = new InMemoryLeaseStore(Schedulers.parallel());

    @AfterEach
    void dispose() {
        renewal.dispose();
        app.dispose();
    }

    private LeasingLockClient client(ClientSettings settings) {
        return LeasingLockClient.create(memory, settings);
    }

    private ClientSettings settings() {
        return ClientSettings.of("t:", Duration.ofMillis(300), null, Duration.ofSeconds(1), null, renewal);
    }

    @Test
    void aLossFoundByARenewalIsDeliveredOffTheRenewalThread() {
        LeasingLockClient client = client(settings());
        FencedLease lease = client.acquire("a").block(Duration.ofSeconds(5));
        assertThat(lease).isNotNull();
        memory.deleteLock("a"); // the next renewal, on the renewal thread, finds it gone
        String thread = lease.lost().map(loss -> {
            assertThat(loss.reason()).isEqualTo(LossReason.NOT_HELD);
            return Thread.currentThread().getName();
        }).block(Duration.ofSeconds(5));
        assertThat(thread).doesNotStartWith("fenced-test-renewal").startsWith("parallel-");
        client.close();
    }

    @Test
    void anEmissionSchedulerReceivesLeasesAndLosses() {
        LeasingLockClient client = client(settings().withEmissionScheduler(app));
        String[] leaseThread = new String[1];
        FencedLease lease = client.acquire("b").doOnNext(l -> leaseThread[0] = Thread.currentThread().getName())
                .block(Duration.ofSeconds(5));
        assertThat(lease).isNotNull();
        assertThat(leaseThread[0]).startsWith("app-thread");
        memory.deleteLock("b");
        String lossThread = lease.lost().map(loss -> Thread.currentThread().getName()).block(Duration.ofSeconds(5));
        assertThat(lossThread).startsWith("app-thread");
        client.close();
    }
}
