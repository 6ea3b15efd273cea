package dev.fenced.lock.internal.memory;

import dev.fenced.lock.internal.LeaseStore;
import dev.fenced.lock.internal.LeaseStoreContract;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import reactor.test.scheduler.VirtualTimeScheduler;

class InMemoryLeaseStoreTest extends LeaseStoreContract {

    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();
    private final InMemoryLeaseStore store = new InMemoryLeaseStore(clock);

    @AfterEach
    void disposeClock() {
        clock.dispose();
    }

    @Override
    protected LeaseStore store() {
        return store;
    }

    @Override
    protected boolean consecutiveTokens() {
        return true;
    }

    @Override
    protected void elapse(Duration duration) {
        clock.advanceTimeBy(duration);
    }
}
