package dev.fenced.lock.micrometer;

import dev.fenced.lock.ForceReleaseResult;
import dev.fenced.lock.LockObserver;
import dev.fenced.lock.LossReason;
import io.micrometer.common.KeyValue;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;
import java.util.Locale;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import java.util.function.IntSupplier;
import org.jspecify.annotations.Nullable;

/**
 * Records a lock client's activity in Micrometer:
 *
 * <table>
 *   <caption>Meters</caption>
 *   <tr><th>meter</th><th>type</th><th>tags</th></tr>
 *   <tr><td>{@code fenced.lock.acquire}</td><td>timer</td><td>{@code outcome}: acquired, busy, timed_out,
 *       failed, cancelled</td></tr>
 *   <tr><td>{@code fenced.lock.held}</td><td>gauge</td><td></td></tr>
 *   <tr><td>{@code fenced.lock.renewals}</td><td>counter (leases renewed)</td><td></td></tr>
 *   <tr><td>{@code fenced.lock.renewal.failures}</td><td>counter (leases whose renewal failed)</td><td></td></tr>
 *   <tr><td>{@code fenced.lock.lost}</td><td>counter</td><td>{@code reason}: expired, not_held,
 *       client_closed, superseded, server_changed, scheduler_rejected, max_hold_reached</td></tr>
 *   <tr><td>{@code fenced.job}</td><td>timer (one per tick of a job, acquire to release)</td><td>{@code job}: the
 *       job's name; {@code outcome}: ran, skipped, failed, lost, cut_off, unavailable, cancelled</td></tr>
 *   <tr><td>{@code fenced.lock.write.rejected}</td><td>counter (stale-token rejections)</td><td></td></tr>
 *   <tr><td>{@code fenced.lock.force.released}</td><td>counter (force-releases)</td><td>{@code outcome}: released,
 *       not_held</td></tr>
 *   <tr><td>{@code fenced.lock.fleet.size}</td><td>gauge (held locks in the last complete fleet view; registered
 *       at the first one)</td><td></td></tr>
 * </table>
 *
 * <p>Lock names are unbounded, so no meter is tagged with the raw name. {@link Builder#lockTag(Function)}
 * adds a {@code lock} tag computed from the name (for example its prefix before {@code ':'}); keep its
 * values few. With an {@link ObservationRegistry}, every acquire is also an observation
 * {@code fenced.lock.acquire} (low-cardinality key {@code outcome}; the lock name as a high-cardinality key
 * {@code fenced.lock.name}), so traces show acquires; every tick of a job an observation {@code fenced.job}
 * (low-cardinality keys {@code job} and {@code outcome}; job names are few and fixed in code, so they tag meters as
 * they are); and every force-release an observation {@code fenced.lock.force.release} (key {@code outcome}; the name
 * and the reason given as the high-cardinality keys {@code fenced.lock.name} and {@code fenced.lock.reason}), so the
 * record of who broke a lock reaches traces.
 *
 * <p>Thread-safe.
 */
public final class MicrometerLockObserver implements LockObserver {

    private final MeterRegistry registry;
    private final ObservationRegistry observations;
    private final @Nullable Function<String, String> lockTag;
    private final AtomicLong fleetSize = new AtomicLong();

    private MicrometerLockObserver(Builder builder) {
        this.registry = builder.registry;
        this.observations = builder.observations;
        this.lockTag = builder.lockTag;
    }

    /**
     * Starts an observer on {@code registry}.
     *
     * @param registry where meters are registered
     * @return a builder
     */
    public static Builder builder(MeterRegistry registry) {
        return new Builder(registry);
    }

    @Override
    public AcquireObservation acquireStarted(String name) {
        Timer.Sample sample = Timer.start(registry);
        Observation observation = Observation.createNotStarted("fenced.lock.acquire", observations)
                .contextualName("fenced lock acquire")
                .highCardinalityKeyValue(KeyValue.of("fenced.lock.name", name))
                .start();
        Tags tags = lockTags(name);
        return (outcome, error) -> {
            String value = outcome.name().toLowerCase(Locale.ROOT);
            sample.stop(Timer.builder("fenced.lock.acquire")
                    .description("Acquires of fenced locks, by outcome")
                    .tags(tags).tag("outcome", value)
                    .register(registry));
            observation.lowCardinalityKeyValue("outcome", value);
            if (error != null) {
                observation.error(error);
            }
            observation.stop();
        };
    }

    @Override
    public JobObservation jobStarted(String job) {
        Timer.Sample sample = Timer.start(registry);
        Observation observation = Observation.createNotStarted("fenced.job", observations)
                .contextualName("fenced job " + job)
                .lowCardinalityKeyValue(KeyValue.of("job", job))
                .start();
        return new JobObservation() {
            @Override
            public void ended(dev.fenced.lock.JobOutcome outcome) {
                outcome.error().ifPresent(observation::error);
                stop(outcome.status().name().toLowerCase(Locale.ROOT));
            }

            @Override
            public void cancelled() {
                stop("cancelled");
            }

            private void stop(String outcome) {
                sample.stop(Timer.builder("fenced.job")
                        .description("Ticks of fenced jobs, by outcome")
                        .tag("job", job).tag("outcome", outcome)
                        .register(registry));
                observation.lowCardinalityKeyValue("outcome", outcome);
                observation.stop();
            }
        };
    }

    @Override
    public void leasesRenewed(int count) {
        Counter.builder("fenced.lock.renewals").description("Leases renewed").register(registry).increment(count);
    }

    @Override
    public void renewalFailed(int count) {
        Counter.builder("fenced.lock.renewal.failures").description("Leases whose renewal round trip failed")
                .register(registry).increment(count);
    }

    @Override
    public void leaseLost(String name, LossReason reason) {
        Counter.builder("fenced.lock.lost").description("Leases lost, by reason")
                .tags(lockTags(name)).tag("reason", reason.name().toLowerCase(Locale.ROOT))
                .register(registry).increment();
    }

    @Override
    public void writeRejected(String name) {
        Counter.builder("fenced.lock.write.rejected").description("Writes rejected by storage for a stale fencing token")
                .tags(lockTags(name)).register(registry).increment();
    }

    @Override
    public void forceReleased(String name, ForceReleaseResult.Outcome outcome, String reason) {
        Counter.builder("fenced.lock.force.released").description("Force-releases of fenced locks, by outcome")
                .tags(lockTags(name)).tag("outcome", outcome.name().toLowerCase(Locale.ROOT))
                .register(registry).increment();
        Observation.createNotStarted("fenced.lock.force.release", observations)
                .contextualName("fenced lock force-release")
                .lowCardinalityKeyValue("outcome", outcome.name().toLowerCase(Locale.ROOT))
                .highCardinalityKeyValue(KeyValue.of("fenced.lock.name", name))
                .highCardinalityKeyValue(KeyValue.of("fenced.lock.reason", reason))
                .start().stop();
    }

    @Override
    public void fleetListed(long count) {
        fleetSize.set(count);
        Gauge.builder("fenced.lock.fleet.size", fleetSize, AtomicLong::get)
                .description("Held locks listed by the last complete fleet view of this client")
                .strongReference(true).register(registry);
    }

    @Override
    public void heldLeases(IntSupplier heldLeases) {
        Gauge.builder("fenced.lock.held", heldLeases, IntSupplier::getAsInt).description("Leases held now")
                .strongReference(true).register(registry);
    }

    private Tags lockTags(String name) {
        Function<String, String> mapper = lockTag;
        return mapper == null ? Tags.empty() : Tags.of("lock", Objects.requireNonNullElse(mapper.apply(name), "none"));
    }

    /** Builds a {@link MicrometerLockObserver}; not thread-safe. */
    public static final class Builder {

        private final MeterRegistry registry;
        private ObservationRegistry observations = ObservationRegistry.NOOP;
        private @Nullable Function<String, String> lockTag;

        private Builder(MeterRegistry registry) {
            this.registry = Objects.requireNonNull(registry, "registry must not be null");
        }

        /**
         * Also report each acquire as an observation. Default: none ({@link ObservationRegistry#NOOP}).
         *
         * @param observations the observation registry
         * @return this builder
         */
        public Builder observationRegistry(ObservationRegistry observations) {
            this.observations = Objects.requireNonNull(observations, "observations must not be null");
            return this;
        }

        /**
         * Adds a {@code lock} tag to per-lock meters, computed from the lock name. Default: no such tag. The
         * function must return few distinct values.
         *
         * @param lockTag maps a lock name to a tag value
         * @return this builder
         */
        public Builder lockTag(Function<String, String> lockTag) {
            this.lockTag = Objects.requireNonNull(lockTag, "lockTag must not be null");
            return this;
        }

        /**
         * Builds the observer.
         *
         * @return the observer
         */
        public MicrometerLockObserver build() {
            return new MicrometerLockObserver(this);
        }
    }
}
