package dev.fenced.lock;

import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.lock.internal.DroppedLeases;
import dev.fenced.lock.internal.KeyLayout;
import dev.fenced.lock.internal.LeasingLockClient;
import dev.fenced.lock.internal.RedisLeaseStore;
import dev.fenced.lock.internal.ReplicaAcks;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.RedisClusterClient;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * A client for fenced distributed locks on Redis or Valkey.
 *
 * <pre>{@code
 * FencedLockClient locks = FencedLockClient.builder()
 *         .redisUri("redis://127.0.0.1:6379")
 *         .build();
 *
 * Flux<Receipt> receipts = locks.withLease("invoice:42",
 *         lease -> invoices.settle(42, lease.token()));
 * }</pre>
 *
 * <p>Every method is cold: nothing is sent until subscription, and bad arguments or a closed client are
 * reported as an error signal before any I/O. No method blocks, except {@link #close()}. Signals of an
 * acquire arrive on the driver's I/O thread or on the renewal scheduler; do not block there.
 *
 * <p>Thread-safe. Create one client per application (per Redis deployment) and share it.
 */
public interface FencedLockClient extends AutoCloseable {

    /**
     * Starts a builder with the documented defaults.
     *
     * @return a new builder
     */
    static Builder builder() {
        return new Builder();
    }

    /**
     * Makes Reactor release a lease that a subscriber drops, for applications that subscribe to an acquire
     * with a lambda ({@code acquire(name).subscribe(lease -> ...)}) and may dispose that subscription.
     *
     * <p>A lambda subscriber disposed in the very moment its lease arrives drops the lease: Reactor hands it
     * to {@code Hooks.onNextDropped}, which by default only logs it, and the lease stays held and renewed
     * until the client closes. Within its own operators the client releases such leases itself; a subscriber
     * outside it is reached only through the global hook, which this installs (once per JVM; Reactor's hook is
     * cumulative, so other handlers keep running; values other than leases are ignored, and Reactor's default
     * debug log of dropped values stops). {@link #withLease(String, Function)} and subscribers that keep what
     * they receive ({@code BaseSubscriber}, {@code StepVerifier}, {@code block()}) need none of this.
     */
    static void releaseLeasesDroppedBySubscribers() {
        DroppedLeases.installGlobalHook();
    }

    /**
     * Acquires a lease on {@code name}, waiting up to the client's {@linkplain Builder#maxWait(Duration)
     * maximum wait} if the lock is held.
     *
     * <p>Subscribing sends the acquire; while the lock is held by someone else it waits for a release
     * notification or a timer bounded by the holder's remaining lease, without blocking a thread.
     * Cancelling before the lease is emitted leaves no lock behind: an attempt already sent is undone by
     * an owner-checked release. After emission the lease is the subscriber's to
     * {@linkplain FencedLease#release() release}; {@link #withLease(String, Function)} does that for you.
     *
     * <p>If the subscriber's Reactor Context already holds a lease on {@code name} (inside
     * {@code withLease}), that lease is emitted again, same token; releasing it through this view is a
     * no-op reported as {@link ReleaseOutcome#RETAINED}.
     *
     * @param name the lock name: not blank, at most 1024 characters, no control characters or braces
     * @return the lease; errors: {@link LockAcquireTimeoutException}, {@link LockServiceException},
     *     {@link LockClientClosedException}, {@link IllegalArgumentException} for a bad name
     */
    Mono<FencedLease> acquire(String name);

    /**
     * Acquires a lease on {@code name} with per-call options, as {@link #acquire(String)} does. With a
     * maximum wait of zero ({@link AcquireOptions#tryOnce()}) a single attempt is made and the result is
     * empty when the lock is held.
     *
     * @param name the lock name
     * @param options the lease time and maximum wait of this call
     * @return the lease, or empty for a single attempt on a held lock
     */
    Mono<FencedLease> acquire(String name, AcquireOptions options);

    /**
     * Makes a single attempt: the same as {@code acquire(name, AcquireOptions.tryOnce())}.
     *
     * @param name the lock name
     * @return the lease, or empty when the lock is held
     */
    Mono<FencedLease> tryAcquire(String name);

    /**
     * Acquires {@code name}, runs {@code work} with the lease, and releases the lease when the work
     * completes, errors or is cancelled.
     *
     * <p>If the lease is lost while the work runs, the work is cancelled and the result fails with
     * {@link LeaseLostException}. The lease is in the Reactor Context of the work ({@link
     * FencedLease#current(String)}), so operators such as the R2DBC fencing operator find its token. A
     * nested {@code withLease} on a name the Context already holds reuses that lease and does not
     * release it.
     *
     * @param name the lock name
     * @param work the work to run while holding the lease
     * @param <T> the type of the results
     * @return the results of the work
     */
    <T> Flux<T> withLease(String name, Function<? super FencedLease, ? extends Publisher<T>> work);

    /**
     * As {@link #withLease(String, Function)}, with per-call options. With a maximum wait of zero the
     * work does not run and the result completes empty when the lock is held.
     *
     * @param name the lock name
     * @param options the lease time and maximum wait of this call
     * @param work the work to run while holding the lease
     * @param <T> the type of the results
     * @return the results of the work
     */
    <T> Flux<T> withLease(String name, AcquireOptions options, Function<? super FencedLease, ? extends Publisher<T>> work);

    /**
     * Sends one round trip to the lock service ({@code PING} on the lock connection), for health checks.
     *
     * @return the round-trip time; {@link LockServiceException} if the service cannot be reached within the
     *     command timeout, {@link LockClientClosedException} once closed
     */
    Mono<Duration> ping();

    /**
     * The number of leases this client holds now (acquired, not yet released or lost).
     *
     * @return the count
     */
    int heldLeases();

    /**
     * Closes the client: new acquires fail with {@link LockClientClosedException}, waits in progress end
     * with that error, held leases are released (their {@link FencedLease#lost()} signals
     * {@link LossReason#CLIENT_CLOSED}), then the connections close. A Redis client passed to the builder
     * is left open; one created by the builder is shut down. Idempotent: every call returns the same
     * completion.
     *
     * @return completes when the client is closed; never errors
     */
    Mono<Void> closeLater();

    /**
     * Closes the client as {@link #closeLater()} does and waits, at most ten seconds, for it to finish.
     * This method blocks the calling thread: call it on shutdown, never on an event-loop thread (on Reactor's
     * non-blocking threads and Netty's, such as Lettuce's, it throws {@link IllegalStateException}; use
     * {@link #closeLater()} there).
     */
    @Override
    void close();

    /**
     * Builds a {@link FencedLockClient}. Every setter validates its argument at once and documents its
     * default; {@link #build()} copies the settings, so a builder may be reused.
     *
     * <p>Not thread-safe.
     */
    final class Builder {

        private @Nullable RedisURI redisUri;
        private @Nullable RedisClient redisClient;
        private @Nullable List<RedisURI> clusterSeeds;
        private @Nullable RedisClusterClient clusterClient;
        private ReplicaAcks replicaAcks = ReplicaAcks.NONE;
        private String keyPrefix = "fenced:";
        private Duration leaseTime = Duration.ofSeconds(30);
        private @Nullable Duration renewalPeriod;
        private Duration maxWait = Duration.ofSeconds(30);
        private @Nullable Duration commandTimeout;
        private @Nullable Scheduler scheduler;
        private LockObserver observer = LockObserver.NONE;
        private TokenScheme tokenScheme = TokenScheme.SERVER_TIME;

        Builder() {
        }

        /**
         * The Redis server to use, as a URI such as {@code redis://127.0.0.1:6379} (Lettuce's URI syntax).
         * A Sentinel URI such as {@code redis-sentinel://10.0.0.1:26379,10.0.0.2:26379#mymaster} makes the
         * client ask the Sentinels for the primary on every (re)connect, so it follows a failover. The
         * client creates and owns a Lettuce {@code RedisClient} and shuts it down on close. One of this,
         * {@link #redisClient(RedisClient, RedisURI)}, {@link #redisCluster(String...)} or
         * {@link #redisClusterClient(RedisClusterClient)} is required; the last one set wins.
         *
         * @param uri the URI
         * @return this builder
         * @throws IllegalArgumentException if the URI cannot be parsed
         */
        public Builder redisUri(String uri) {
            Objects.requireNonNull(uri, "uri must not be null");
            try {
                return redisUri(RedisURI.create(uri));
            } catch (RuntimeException e) {
                throw new IllegalArgumentException("Not a valid Redis URI: '" + uri + "': " + e.getMessage(), e);
            }
        }

        /**
         * The Redis server to use, as a Lettuce {@link RedisURI}; the client owns the Lettuce client it
         * creates for it.
         *
         * @param uri the URI
         * @return this builder
         */
        public Builder redisUri(RedisURI uri) {
            Objects.requireNonNull(uri, "uri must not be null");
            clearAddress();
            this.redisUri = uri;
            return this;
        }

        /**
         * Shares an existing Lettuce client (and its event loops) and connects it to {@code uri}. The
         * lock client opens its own connections on it, applies its own command timeout, and leaves the
         * Lettuce client open on close.
         *
         * @param client the Lettuce client
         * @param uri the server to connect to
         * @return this builder
         */
        public Builder redisClient(RedisClient client, RedisURI uri) {
            Objects.requireNonNull(client, "client must not be null");
            Objects.requireNonNull(uri, "uri must not be null");
            clearAddress();
            this.redisClient = client;
            this.redisUri = uri;
            return this;
        }

        /**
         * A Redis Cluster, given by one or more of its nodes ({@code redis://host:port}); the client discovers
         * the others. The client creates and owns a Lettuce {@code RedisClusterClient} that refreshes its view
         * of the cluster on redirections, reconnects and every 30 seconds. All keys of a lock share a hash
         * slot, so each lock lives on one node; locks spread over the nodes by name.
         *
         * @param seedUris at least one node URI
         * @return this builder
         * @throws IllegalArgumentException if there is none, or one cannot be parsed
         */
        public Builder redisCluster(String... seedUris) {
            Objects.requireNonNull(seedUris, "seedUris must not be null");
            if (seedUris.length == 0) {
                throw new IllegalArgumentException("At least one cluster node URI is required");
            }
            List<RedisURI> seeds = new ArrayList<>();
            for (String uri : seedUris) {
                Objects.requireNonNull(uri, "a seed URI must not be null");
                try {
                    seeds.add(RedisURI.create(uri));
                } catch (RuntimeException e) {
                    throw new IllegalArgumentException("Not a valid Redis URI: '" + uri + "': " + e.getMessage(), e);
                }
            }
            clearAddress();
            this.clusterSeeds = List.copyOf(seeds);
            return this;
        }

        /**
         * Shares an existing Lettuce cluster client (and its event loops and topology). The lock client opens
         * its own connections on it, applies its own command timeout, and leaves the Lettuce client open on
         * close. Give the cluster client adaptive topology refresh so that it follows reshards and failovers.
         *
         * @param client the Lettuce cluster client
         * @return this builder
         */
        public Builder redisClusterClient(RedisClusterClient client) {
            Objects.requireNonNull(client, "client must not be null");
            clearAddress();
            this.clusterClient = client;
            return this;
        }

        private void clearAddress() {
            redisUri = null;
            redisClient = null;
            clusterSeeds = null;
            clusterClient = null;
        }

        /**
         * Requires {@code replicas} replicas to acknowledge every acquire before the lease is emitted: after
         * the acquire script the client sends {@code WAIT replicas timeout} on a connection of its own, and
         * fails the acquire with {@link ReplicaAcknowledgementException} (releasing the lock again) when
         * fewer acknowledge in time. Default: none.
         *
         * <p>This narrows the window in which a failover loses a lock or its token counter; it does not close
         * it ({@code WAIT} does not make Redis strongly consistent: a replica that acknowledged can still lose
         * the race to be promoted, and renewals are not acknowledged). What keeps data safe across any
         * failover is the storage-side token check (the fence table of {@code r2dbc-fencing}).
         *
         * @param replicas at least 1
         * @param timeout how long to wait for the replicas: positive, shorter than the command timeout (checked by
         *     {@link #build()}); it adds to the latency of every acquire when a replica is slow
         * @return this builder
         */
        public Builder replicaAcknowledgement(int replicas, Duration timeout) {
            if (replicas < 1) {
                throw new IllegalArgumentException("replicas must be at least 1, was " + replicas);
            }
            Durations.requirePositive(timeout, "timeout", AcquireOptions.MAX_LEASE_TIME);
            this.replicaAcks = new ReplicaAcks(replicas, timeout);
            return this;
        }

        /**
         * The prefix of every key and channel this client uses. Default {@code "fenced:"}. Clients that
         * must exclude each other use the same prefix.
         *
         * @param keyPrefix at most 256 characters, without braces or control characters; may be empty
         * @return this builder
         */
        public Builder keyPrefix(String keyPrefix) {
            this.keyPrefix = KeyLayout.requireValidPrefix(keyPrefix);
            return this;
        }

        /**
         * The default lease time: how long a lease stays valid without renewal. Default 30 seconds.
         *
         * @param leaseTime at least 10 ms and at most one day
         * @return this builder
         */
        public Builder leaseTime(Duration leaseTime) {
            this.leaseTime = Durations.requireLeaseTime(leaseTime, "leaseTime");
            return this;
        }

        /**
         * How often a held lease with the default lease time is renewed. Default: a third of the lease
         * time. Leases with a per-call lease time are renewed at the same ratio.
         *
         * @param renewalPeriod positive and shorter than the lease time (checked by {@link #build()})
         * @return this builder
         */
        public Builder renewalPeriod(Duration renewalPeriod) {
            this.renewalPeriod = Durations.requirePositive(renewalPeriod, "renewalPeriod", AcquireOptions.MAX_LEASE_TIME);
            return this;
        }

        /**
         * How long {@link FencedLockClient#acquire(String)} waits for a held lock before failing with
         * {@link LockAcquireTimeoutException}. Default 30 seconds. Zero makes a single attempt.
         *
         * @param maxWait between zero and one day
         * @return this builder
         */
        public Builder maxWait(Duration maxWait) {
            this.maxWait = Durations.requireWait(maxWait, "maxWait");
            return this;
        }

        /**
         * How long a Redis command may take before it fails with {@link LockServiceException}. Default: a
         * third of the lease time, at most 5 seconds, so that a renewal that hangs is retried before the
         * lease runs out. Connecting (on first use, and after the connection was lost) may take the command
         * timeout but at least 5 seconds.
         *
         * @param commandTimeout positive and shorter than the lease time (checked by {@link #build()})
         * @return this builder
         */
        public Builder commandTimeout(Duration commandTimeout) {
            this.commandTimeout = Durations.requirePositive(commandTimeout, "commandTimeout", AcquireOptions.MAX_LEASE_TIME);
            return this;
        }

        /**
         * The scheduler that runs renewals, wait timers and timeouts. Lease deadlines use the monotonic
         * {@link System#nanoTime()}, except on Reactor's {@code VirtualTimeScheduler}, whose virtual time is the
         * clock (so tests of renewal and expiry take no real time). Default: a new single daemon thread per
         * client, disposed on close. An injected scheduler is not disposed.
         *
         * @param scheduler the scheduler
         * @return this builder
         */
        public Builder scheduler(Scheduler scheduler) {
            this.scheduler = Objects.requireNonNull(scheduler, "scheduler must not be null");
            return this;
        }

        /**
         * Where the client reports acquires, renewals, losses and rejected writes, for metrics and tracing.
         * Default {@link LockObserver#NONE}. For Micrometer:
         * {@code observer(MicrometerLockObserver.builder(meterRegistry).build())}.
         *
         * @param observer the observer
         * @return this builder
         */
        public Builder observer(LockObserver observer) {
            this.observer = Objects.requireNonNull(observer, "observer must not be null");
            return this;
        }

        /**
         * How fencing tokens are minted. Default {@link TokenScheme#SERVER_TIME}: after Redis loses a lock's
         * token counter, the next token is still above every earlier one. {@link TokenScheme#COUNTER} gives
         * consecutive tokens from 1 instead, with the window that {@link TokenScheme#COUNTER} describes. Clients
         * that share a key prefix may use different schemes: either way the next token exceeds the counter.
         *
         * @param tokenScheme the scheme
         * @return this builder
         */
        public Builder tokenScheme(TokenScheme tokenScheme) {
            this.tokenScheme = Objects.requireNonNull(tokenScheme, "tokenScheme must not be null");
            return this;
        }

        /**
         * Builds the client. No connection is made until the first command needs one.
         *
         * @return a new client
         * @throws IllegalStateException if no Redis address was given, the renewal period or command timeout
         *     is not shorter than the lease time, or the replica acknowledgement timeout not shorter than the
         *     command timeout
         */
        public FencedLockClient build() {
            RedisURI uri = redisUri;
            List<RedisURI> seeds = clusterSeeds;
            RedisClusterClient cluster = clusterClient;
            if (uri == null && seeds == null && cluster == null) {
                throw new IllegalStateException("A Redis address is required: call redisUri(...), redisClient(...), "
                        + "redisCluster(...) or redisClusterClient(...)");
            }
            ClientSettings settings = ClientSettings.of(keyPrefix, leaseTime, renewalPeriod, maxWait, commandTimeout, scheduler)
                    .withObserver(observer)
                    .withTokenScheme(tokenScheme);
            if (replicaAcks.timeout().compareTo(settings.commandTimeout()) >= 0) {
                if (settings.ownsScheduler()) {
                    settings.scheduler().dispose();
                }
                throw new IllegalStateException("The replica acknowledgement timeout (" + replicaAcks.timeout()
                        + ") must be shorter than the command timeout (" + settings.commandTimeout() + "): WAIT is a command");
            }
            RedisLeaseStore store;
            if (cluster != null) {
                store = RedisLeaseStore.sharedCluster(cluster, settings, replicaAcks);
            } else if (seeds != null) {
                store = RedisLeaseStore.cluster(seeds, settings, replicaAcks);
            } else if (redisClient != null) {
                store = RedisLeaseStore.shared(redisClient, uri, settings, replicaAcks);
            } else {
                store = RedisLeaseStore.owned(uri, settings, replicaAcks);
            }
            return LeasingLockClient.create(store, settings);
        }
    }
}
