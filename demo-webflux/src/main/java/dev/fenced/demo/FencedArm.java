package dev.fenced.demo;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.r2dbc.FencedWrite;
import io.lettuce.core.RedisURI;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/** The scenario with Fenced: leases with fencing tokens, writes through {@link FencedWrite}. */
final class FencedArm implements ScenarioArm {

    private final FencedLockClient applicationLocks;
    private final String keyPrefix;

    FencedArm(FencedLockClient applicationLocks, String keyPrefix) {
        this.applicationLocks = applicationLocks;
        this.keyPrefix = keyPrefix;
    }

    @Override
    public boolean fencing() {
        return true;
    }

    @Override
    public Mono<Locks> workerA(RedisURI viaRelay, Duration leaseTime) {
        // Building a lock client draws its id from SecureRandom, which may block: not on an event loop.
        return Mono.fromCallable(() -> FencedLockClient.builder()
                        .redisUri(viaRelay)
                        .keyPrefix(keyPrefix)
                        .leaseTime(leaseTime)
                        .commandTimeout(Duration.ofMillis(250))
                        .holderLabel(ScenarioService.WORKER_A_LABEL)
                        .build())
                .subscribeOn(Schedulers.boundedElastic())
                .map(client -> new ClientLocks(client, AcquireOptions.defaults().withLeaseTime(leaseTime), true));
    }

    @Override
    public Locks workerB() {
        return new ClientLocks(applicationLocks, AcquireOptions.defaults(), false);
    }

    @Override
    public Mono<Long> write(Connection connection, Held held, Invoice seen, String worker) {
        return FencedWrite.into(InvoiceRepository.TABLE).key("id", seen.id())
                .set("status", "PROCESSED")
                .set("ledger_total", seen.ledgerTotal() + seen.amount())
                .set("times_processed", seen.timesProcessed() + 1)
                .set("processed_by", worker)
                .update(connection, ((LeaseHeld) held).lease);
    }

    private record ClientLocks(FencedLockClient client, AcquireOptions options, boolean owned) implements Locks {

        @Override
        public Mono<Held> acquire(String name, Duration maxWait) {
            return client.acquire(name, options.withMaxWait(maxWait)).map(LeaseHeld::new);
        }

        @Override
        public Mono<Void> close() {
            return owned ? client.closeLater() : Mono.empty();
        }
    }

    private record LeaseHeld(FencedLease lease) implements Held {

        @Override
        public @Nullable Long token() {
            return lease.token();
        }

        @Override
        public String grant() {
            return "with fencing token " + lease.token();
        }

        @Override
        public String beliefBeforeWrite() {
            return "its lease is still valid for " + lease.remainingValidity().toMillis() + " ms by its own clock, so "
                    + "the write passes the local check";
        }

        @Override
        public Mono<String> lost() {
            return lease.lost().map(lost -> "A's client notices its lease is gone (" + lost.reason() + "): its "
                    + "renewals never reached Redis. Its write is already on the wire.");
        }

        @Override
        public Mono<String> release() {
            return lease.release().map(outcome -> "releases the lock (" + outcome + ")");
        }
    }
}
