package dev.fenced.shedlock;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.internal.KeyLayout;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Iterator;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import net.javacrumbs.shedlock.core.ExtensibleLockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import org.jspecify.annotations.Nullable;
import reactor.core.scheduler.Scheduler;

/**
 * A ShedLock {@link ExtensibleLockProvider} backed by a {@link FencedLockClient}: the one bean to replace when
 * moving {@code @SchedulerLock} jobs (or a {@code LockingTaskExecutor}) to Fenced's locks, on Redis, Valkey or the
 * PostgreSQL lease store.
 *
 * <pre>{@code
 * @Bean
 * LockProvider lockProvider(FencedLockClient locks) {
 *     return FencedLockProvider.of(locks);
 * }
 * }</pre>
 *
 * <p>ShedLock's contract, as this provider keeps it:
 * <ul>
 *   <li>{@link #lock(LockConfiguration)} makes one attempt and does not wait: empty while the lock is held
 *       (by another instance, or by an earlier run of this one that has not unlocked yet or whose
 *       {@code lockAtLeastFor} has not passed).</li>
 *   <li>{@code lockAtMostFor} is the lease's hold cap ({@link AcquireOptions#withMaxHold(Duration)}): the lease is
 *       renewed while the job runs, never past the cap, and at the cap it is released and lost
 *       ({@code MAX_HOLD_REACHED}), so a lock whose {@code lockAtMostFor} passed can be taken by the next
 *       instance. (A ShedLock job that overruns keeps running: ShedLock calls no code of the provider to stop
 *       it. Its lease, {@link FencedSimpleLock#lease()}, says it was lost, and fenced writes made with its token
 *       are refused once another instance took the lock.) Unlike ShedLock's expiry, the cap is not how long
 *       an instance that stops answering keeps the lock: one that stops renewing without dying (a long pause, a
 *       partition from the lock service) loses its lease after the {@linkplain Builder#leaseTime(Duration) lease
 *       time} (the client's, 30 s by default), and another instance may then run the job while it still runs.
 *       Fence the job's writes with its lease, or raise the lease time.</li>
 *   <li>{@link SimpleLock#unlock()} keeps the lock until {@code lockAtLeastFor} has passed since the grant, by
 *       the lock service's clock ({@link FencedLease#releaseNoSoonerThan(Duration)}: the remainder becomes the
 *       lock's expiry in the service, and nothing renews it); past that it releases at once.</li>
 *   <li>{@link SimpleLock#extend(Duration, Duration)} moves the cap to {@code lockAtMostFor} from now
 *       ({@link FencedLease#resetMaxHold(Duration)}, which also checks with the service that the lease is still
 *       held) and returns a new lock over the same lease whose {@code lockAtLeastFor} counts from the extend;
 *       it returns empty when the lease was lost. Either way the old lock is then invalid, as ShedLock
 *       documents (its {@code unlock} and {@code extend} throw {@link IllegalStateException}).</li>
 * </ul>
 *
 * <p>Lock names: ShedLock's name, after the {@linkplain Builder#lockNamePrefix(String) prefix} (none by
 * default), is the Fenced lock name, so the lease's {@link FencedLease#lockId()} is the client's key prefix and
 * that name. A name Fenced refuses (blank, longer than 1,024 characters, with control characters or braces)
 * fails {@code lock} with {@link IllegalArgumentException} naming it, before any I/O. {@code lockAtMostFor}
 * must be between 10 ms and one day ({@link AcquireOptions#MAX_LEASE_TIME}).
 *
 * <p>Blocking: ShedLock's API is synchronous, so {@code lock}, {@code unlock} and {@code extend} block the
 * calling thread until the lock service answered (each is bounded by the client's command timeout). Called on a
 * Reactor non-blocking thread ({@code Schedulers.isInNonBlockingThread()}) they fail at once with
 * {@link IllegalStateException}; ShedLock runs them on the scheduler's thread. Errors of the client
 * ({@code LockServiceException} when the service cannot be reached, {@code LockClientClosedException}) are
 * thrown as they are; an interrupt while {@code lock} waits cancels the attempt (nothing is left held: an attempt
 * granted just as the interrupt arrived is released before {@code lock} throws) and throws ShedLock's
 * {@code LockException} with the interrupt flag set again. {@code unlock} is not interruptible: it waits for the
 * release and then restores the flag, so that an interrupt never replaces a job's result.
 *
 * <p>The fencing token: the lock this provider returns is a {@link FencedSimpleLock}, and
 * {@link #currentLease(String)} gives the lease to code that runs inside ShedLock's
 * {@code LockingTaskExecutor} (or a {@code @SchedulerLock} method) on the thread that took the lock.
 *
 * <p>Thread-safe: one provider serves every job and thread of the application.
 */
public final class FencedLockProvider implements ExtensibleLockProvider {

    /** Leases this thread took through any provider and has not unlocked, innermost last. */
    private static final ThreadLocal<Deque<Active>> ACTIVE = new ThreadLocal<>();
    private static final Duration MIN_HOLD = Duration.ofMillis(10);

    private final FencedLockClient client;
    private final String lockNamePrefix;
    private final @Nullable Duration leaseTime;
    private final LongSupplier nanoClock;

    private FencedLockProvider(FencedLockClient client, String lockNamePrefix, @Nullable Duration leaseTime,
            LongSupplier nanoClock) {
        this.client = client;
        this.lockNamePrefix = lockNamePrefix;
        this.leaseTime = leaseTime;
        this.nanoClock = nanoClock;
    }

    /**
     * A provider with the defaults: no lock name prefix, the client's lease time, {@code System.nanoTime()} as
     * the clock.
     *
     * @param client the lock client; the provider never closes it
     * @return a new provider
     */
    public static FencedLockProvider of(FencedLockClient client) {
        return builder(client).build();
    }

    /**
     * Starts a builder.
     *
     * @param client the lock client; the provider never closes it
     * @return a new builder
     */
    public static Builder builder(FencedLockClient client) {
        return new Builder(Objects.requireNonNull(client, "client must not be null"));
    }

    /**
     * Takes the lock named in {@code configuration} if it is free, without waiting. Blocks the calling thread for
     * one round trip to the lock service.
     *
     * @param configuration ShedLock's lock configuration: the name, {@code lockAtMostFor} (the hold cap) and
     *     {@code lockAtLeastFor} (kept after unlock)
     * @return the lock, a {@link FencedSimpleLock}; empty when the lock is held
     * @throws IllegalArgumentException for a name Fenced refuses, or a {@code lockAtMostFor} under 10 ms or over
     *     one day
     * @throws IllegalStateException on a Reactor non-blocking thread
     */
    @Override
    public Optional<SimpleLock> lock(LockConfiguration configuration) {
        Objects.requireNonNull(configuration, "configuration must not be null");
        String shedLockName = configuration.getName();
        String name = fencedName(shedLockName);
        AcquireOptions options = AcquireOptions.tryOnce().withMaxHold(requireHoldCap(configuration.getLockAtMostFor(),
                shedLockName));
        if (leaseTime != null) {
            options = options.withLeaseTime(leaseTime);
        }
        Blocking.refuseNonBlockingThread("lock", shedLockName);
        // Measured before the acquire is sent, so that lockAtLeastFor counted from here never ends before it ends
        // counted from the grant.
        long sentAt = nanoClock.getAsLong();
        FencedLease lease = Blocking.awaitAcquire(client.acquire(name, options), shedLockName);
        if (lease == null) {
            return Optional.empty();
        }
        LeaseLock lock = new LeaseLock(this, configuration, lease, sentAt, sentAt);
        push(new Active(shedLockName, lease));
        return Optional.of(lock);
    }

    /**
     * The lease of the innermost ShedLock lock named {@code lockName} that the current thread took through a
     * {@code FencedLockProvider} and has not unlocked: inside ShedLock's {@code LockingTaskExecutor} (and so in a
     * {@code @SchedulerLock} method), the lease of the run in progress. Pass it to fenced writes so that storage
     * refuses them once the run's lease was lost and another instance took the lock.
     *
     * @param lockName ShedLock's lock name (without the provider's prefix)
     * @return the lease, or empty when this thread holds no such lock or its lease is no longer held (lost, or
     *     unlocked on another thread)
     */
    public static Optional<FencedLease> currentLease(String lockName) {
        Objects.requireNonNull(lockName, "lockName must not be null");
        Deque<Active> active = ACTIVE.get();
        if (active == null) {
            return Optional.empty();
        }
        prune(active);
        Iterator<Active> innermostFirst = active.descendingIterator();
        while (innermostFirst.hasNext()) {
            Active entry = innermostFirst.next();
            if (entry.shedLockName.equals(lockName)) {
                return Optional.of(entry.lease);
            }
        }
        return Optional.empty();
    }

    private String fencedName(String shedLockName) {
        String name = lockNamePrefix + shedLockName;
        String problem = KeyLayout.problemWithName(name);
        if (!problem.isEmpty()) {
            throw new IllegalArgumentException("ShedLock lock name '" + shedLockName
                    + "' cannot be used as Fenced lock name '" + name + "': " + problem);
        }
        return name;
    }

    static Duration requireHoldCap(Duration lockAtMostFor, String shedLockName) {
        if (lockAtMostFor.compareTo(MIN_HOLD) < 0 || lockAtMostFor.compareTo(AcquireOptions.MAX_LEASE_TIME) > 0) {
            throw new IllegalArgumentException("lockAtMostFor of ShedLock lock '" + shedLockName
                    + "' must be between 10 ms and 1 day for Fenced, was " + lockAtMostFor);
        }
        return lockAtMostFor;
    }

    long now() {
        return nanoClock.getAsLong();
    }

    private static void push(Active entry) {
        Deque<Active> active = ACTIVE.get();
        if (active == null) {
            active = new ArrayDeque<>();
            ACTIVE.set(active);
        } else {
            prune(active);
        }
        active.addLast(entry);
    }

    /** Forgets the lease on the current thread (a no-op when the lock is unlocked on another thread). */
    static void forget(FencedLease lease) {
        Deque<Active> active = ACTIVE.get();
        if (active == null) {
            return;
        }
        active.removeIf(entry -> entry.lease == lease);
        prune(active);
        if (active.isEmpty()) {
            ACTIVE.remove();
        }
    }

    private static void prune(Deque<Active> active) {
        active.removeIf(entry -> !entry.lease.isHeld());
    }

    private record Active(String shedLockName, FencedLease lease) {
    }

    /** Builds a {@link FencedLockProvider}; not thread-safe. */
    public static final class Builder {

        private final FencedLockClient client;
        private String lockNamePrefix = "";
        private @Nullable Duration leaseTime;
        private LongSupplier nanoClock = System::nanoTime;

        private Builder(FencedLockClient client) {
            this.client = client;
        }

        /**
         * A prefix put before every ShedLock lock name to make the Fenced lock name, to keep ShedLock's names
         * apart from the application's other locks on the same client. Default: none.
         *
         * @param lockNamePrefix the prefix, possibly empty; at most 1,000 characters, no control characters or
         *     braces
         * @return this builder
         * @throws IllegalArgumentException if the prefix could not start a lock name
         */
        public Builder lockNamePrefix(String lockNamePrefix) {
            Objects.requireNonNull(lockNamePrefix, "lockNamePrefix must not be null");
            String problem = lockNamePrefix.length() > 1000 ? "it is longer than 1000 characters"
                    : KeyLayout.problemWithName(lockNamePrefix + "x");
            if (!problem.isEmpty()) {
                throw new IllegalArgumentException("lockNamePrefix '" + lockNamePrefix + "' is not valid: " + problem);
            }
            this.lockNamePrefix = lockNamePrefix;
            return this;
        }

        /**
         * The lease time of each lock: how long the lock survives an instance that stops renewing (a crash, a
         * pause, a partition from the lock service), renewed every third of it while the job runs, never past
         * {@code lockAtMostFor}. An instance that stops renewing keeps the lock this long, not
         * {@code lockAtMostFor}. Default: the client's lease time.
         *
         * @param leaseTime at least 10 ms, at most one day
         * @return this builder
         * @throws IllegalArgumentException if out of range
         */
        public Builder leaseTime(Duration leaseTime) {
            AcquireOptions.defaults().withLeaseTime(leaseTime); // the client's validation and message
            this.leaseTime = leaseTime;
            return this;
        }

        /**
         * The clock that measures the time between taking a lock and extending it, which moves the start of
         * {@code lockAtLeastFor}: give the scheduler the client was built with when that is a
         * {@code VirtualTimeScheduler}. Default: {@code System.nanoTime()}.
         *
         * @param clock the scheduler whose {@code now(NANOSECONDS)} is read
         * @return this builder
         */
        public Builder clock(Scheduler clock) {
            Objects.requireNonNull(clock, "clock must not be null");
            this.nanoClock = () -> clock.now(TimeUnit.NANOSECONDS);
            return this;
        }

        /**
         * Builds the provider. Sends nothing.
         *
         * @return a new provider
         */
        public FencedLockProvider build() {
            return new FencedLockProvider(client, lockNamePrefix, leaseTime, nanoClock);
        }
    }
}
