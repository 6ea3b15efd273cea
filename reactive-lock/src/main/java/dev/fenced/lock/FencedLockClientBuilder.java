package dev.fenced.lock;

import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.lock.internal.HolderLabels;
import dev.fenced.lock.internal.KeyLayout;
import dev.fenced.lock.internal.LeasingLockClient;
import dev.fenced.lock.internal.redis.RedisTarget;
import dev.fenced.lock.internal.redis.ReplicaAcks;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.RedisClusterClient;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import reactor.core.scheduler.Scheduler;

/**
 * Builds a {@link FencedLockClient}. Every setter validates its argument at once and documents its
 * default; {@link #build()} copies the settings, so a builder may be reused.
 *
 * <p>Not thread-safe.
 */
public final class FencedLockClientBuilder {

    /** The default key prefix, {@code "fenced:"}, which the starter uses too (the test kit's is {@code "test:"}). */
    public static final String DEFAULT_KEY_PREFIX = ClientSettings.DEFAULT_KEY_PREFIX;

    /** The default lease time, 30 seconds: the one default of the client, the test kit and the starter. */
    public static final Duration DEFAULT_LEASE_TIME = ClientSettings.DEFAULT_LEASE_TIME;

    /** The default maximum wait of {@link FencedLockClient#acquire(String)}, 30 seconds. */
    public static final Duration DEFAULT_MAX_WAIT = ClientSettings.DEFAULT_MAX_WAIT;

    private @Nullable StoreTarget target;
    private ReplicaAcks replicaAcks = ReplicaAcks.NONE;
    private String keyPrefix = ClientSettings.DEFAULT_KEY_PREFIX;
    private Duration leaseTime = ClientSettings.DEFAULT_LEASE_TIME;
    private @Nullable Duration renewalPeriod;
    private Duration maxWait = ClientSettings.DEFAULT_MAX_WAIT;
    private @Nullable Duration commandTimeout;
    private @Nullable Scheduler scheduler;
    private LockObserver observer = LockObserver.NONE;
    private TokenScheme tokenScheme = TokenScheme.SERVER_TIME;
    private int maxWaitersPerLock = Integer.MAX_VALUE;
    private @Nullable Scheduler emissionScheduler;
    private @Nullable Duration maxHold;
    /** The label to store with grants: {@code null} for the default, the empty string for none. */
    private @Nullable String holderLabel;

    /** The longest accepted {@linkplain #holderLabel(String) holder label}, 200 characters. */
    public static final int MAX_HOLDER_LABEL_LENGTH = HolderLabels.MAX_LENGTH;

    FencedLockClientBuilder() {
    }

    /**
     * The Redis server to use, as a URI such as {@code redis://127.0.0.1:6379} (Lettuce's URI syntax).
     * A Sentinel URI such as {@code redis-sentinel://10.0.0.1:26379,10.0.0.2:26379#mymaster} makes the
     * client ask the Sentinels for the primary on every (re)connect, so it follows a failover. The
     * client creates and owns a Lettuce {@code RedisClient} and shuts it down on close. One of this,
     * {@link #redisClient(RedisClient, RedisURI)}, {@link #redisCluster(String...)} or
     * {@link #redisClusterClient(RedisClusterClient)} (or {@link #postgres(ConnectionFactory)} for locks on
     * PostgreSQL) is required; the last one set wins.
     *
     * @param uri the URI
     * @return this builder
     * @throws IllegalArgumentException if the URI cannot be parsed
     */
    public FencedLockClientBuilder redisUri(String uri) {
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
    public FencedLockClientBuilder redisUri(RedisURI uri) {
        Objects.requireNonNull(uri, "uri must not be null");
        this.target = new StoreTarget.Redis(new RedisTarget.Server(uri));
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
    public FencedLockClientBuilder redisClient(RedisClient client, RedisURI uri) {
        Objects.requireNonNull(client, "client must not be null");
        Objects.requireNonNull(uri, "uri must not be null");
        this.target = new StoreTarget.Redis(new RedisTarget.SharedServer(client, uri));
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
    public FencedLockClientBuilder redisCluster(String... seedUris) {
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
        this.target = new StoreTarget.Redis(new RedisTarget.Cluster(seeds));
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
    public FencedLockClientBuilder redisClusterClient(RedisClusterClient client) {
        Objects.requireNonNull(client, "client must not be null");
        this.target = new StoreTarget.Redis(new RedisTarget.SharedCluster(client));
        return this;
    }

    /**
     * Keeps the leases in PostgreSQL instead of Redis, in the table {@value PostgresLeaseTable#DEFAULT_NAME}
     * (create it with {@link PostgresLeaseTable#create}); see {@link #postgres(ConnectionFactory, PostgresLeaseTable)}.
     *
     * @param connectionFactory a connection factory of r2dbc-postgresql, normally a pool (r2dbc-pool)
     * @return this builder
     */
    public FencedLockClientBuilder postgres(ConnectionFactory connectionFactory) {
        return postgres(connectionFactory, PostgresLeaseTable.defaultTable());
    }

    /**
     * Keeps the leases in a PostgreSQL table instead of Redis, through R2DBC: the client is the same
     * {@link FencedLockClient}, with the same leases, renewal, losses, waiting and errors. Tokens come from a
     * counter in the lock's row, minted in the statement that grants the lock; expiry is decided by the
     * database's clock. Waiting acquires hear of releases through {@code LISTEN/NOTIFY} on one connection the
     * client holds, plus a timer. The lock id of a lease ({@link FencedLease#lockId()}) is the key prefix and the
     * name, as on Redis, and the {@linkplain #tokenScheme(TokenScheme) token scheme} applies (server time is the
     * database's). Every statement takes a connection of {@code connectionFactory} for its duration, and the
     * notifications hold one for the client's life; the client never closes the factory. Replica acknowledgement
     * is for Redis only. One of this or a Redis address is required; the last one set wins. The statements run
     * at the factory's default isolation level, any of them: at {@code REPEATABLE READ} or {@code SERIALIZABLE}
     * a statement that fails to serialize (SQLSTATE 40001) is run again at once, and an acquire that still
     * fails so counts as "busy" (a waiting acquire waits on). An acquire bounds itself by the database's clock:
     * it takes effect no later than about one {@linkplain #commandTimeout(Duration) command timeout} after the
     * database received it, and one that failed without a reply is cancelled there and undone for that long.
     * See the README's "Locks on PostgreSQL" for what is guaranteed. Needs {@code r2dbc-postgresql}, an optional dependency: a
     * client on Redis never loads an R2DBC class.
     *
     * @param connectionFactory a connection factory of r2dbc-postgresql (its connections, or a pool's wrapping
     *     them: notifications need the driver's), normally a pool (r2dbc-pool)
     * @param table the lease table, which must exist
     * @return this builder
     */
    public FencedLockClientBuilder postgres(ConnectionFactory connectionFactory, PostgresLeaseTable table) {
        Objects.requireNonNull(connectionFactory, "connectionFactory must not be null");
        Objects.requireNonNull(table, "table must not be null");
        this.target = new StoreTarget.Postgres(connectionFactory, table);
        return this;
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
    public FencedLockClientBuilder replicaAcknowledgement(int replicas, Duration timeout) {
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
    public FencedLockClientBuilder keyPrefix(String keyPrefix) {
        this.keyPrefix = KeyLayout.requireValidPrefix(keyPrefix);
        return this;
    }

    /**
     * The default lease time: how long a lease stays valid without renewal. Default 30 seconds.
     *
     * @param leaseTime at least 10 ms and at most one day
     * @return this builder
     */
    public FencedLockClientBuilder leaseTime(Duration leaseTime) {
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
    public FencedLockClientBuilder renewalPeriod(Duration renewalPeriod) {
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
    public FencedLockClientBuilder maxWait(Duration maxWait) {
        this.maxWait = Durations.requireWait(maxWait, "maxWait");
        return this;
    }

    /**
     * How long a Redis command (or PostgreSQL statement) may take before it fails with {@link LockServiceException}. Default: a
     * third of the lease time, at most 5 seconds, so that a renewal that hangs is retried before the
     * lease runs out. Connecting (on first use, and after the connection was lost) may take the command
     * timeout but at least 5 seconds; on PostgreSQL, a renewal, a release or a ping gets its pooled connection
     * and runs within the one command timeout, and an acquire cannot take effect later than about one command
     * timeout after the database received it.
     *
     * @param commandTimeout positive and shorter than the lease time (checked by {@link #build()})
     * @return this builder
     */
    public FencedLockClientBuilder commandTimeout(Duration commandTimeout) {
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
    public FencedLockClientBuilder scheduler(Scheduler scheduler) {
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
    public FencedLockClientBuilder observer(LockObserver observer) {
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
    public FencedLockClientBuilder tokenScheme(TokenScheme tokenScheme) {
        this.tokenScheme = Objects.requireNonNull(tokenScheme, "tokenScheme must not be null");
        return this;
    }

    /**
     * Where leases and loss signals are delivered, so that the code they run (the work of {@code withLease},
     * a cancelled scope's error handling) runs on threads of the application's choosing, as reactor-pool's
     * acquisition scheduler does. Default: a lease is delivered on the thread that received the grant
     * (Lettuce's I/O thread, or the client's scheduler for an acquire that waited), and a loss on Reactor's
     * {@code Schedulers.parallel()}, never on the thread that renews. Either way, do not block there.
     *
     * @param emissionScheduler the scheduler
     * @return this builder
     */
    public FencedLockClientBuilder emissionScheduler(Scheduler emissionScheduler) {
        this.emissionScheduler = Objects.requireNonNull(emissionScheduler, "emissionScheduler must not be null");
        return this;
    }

    /**
     * How long a lease is renewed at most, counted from its grant. A lease still held then is no longer renewed
     * and is lost ({@link LossReason#EXPIRED}) at its deadline, with a warning in the log. This is the hard bound
     * on the one leak no hook sees: a lease that reached no subscriber and no hook (for example the losing value
     * of {@code Mono.firstWithSignal}, which Reactor discards without a trace) is released once the garbage
     * collector has collected it, which the collector bounds, not a timer (see {@link FencedLease}). Choose it
     * above the longest work a lease protects. Default: no bound.
     *
     * @param maxHold positive, at most one day, longer than the lease time (checked by {@link #build()})
     * @return this builder
     */
    public FencedLockClientBuilder maxHold(Duration maxHold) {
        this.maxHold = Durations.requirePositive(maxHold, "maxHold", AcquireOptions.MAX_LEASE_TIME);
        return this;
    }

    /**
     * How many acquires of this client may wait for one lock at once. An acquire that would wait beyond that
     * fails at once with {@link LockWaitQueueFullException}, so a burst of work on one hot lock cannot pile up
     * without bound. Default: no limit. (Waiting costs little: only the oldest waiter of a lock makes attempts
     * and keeps a timer.)
     *
     * @param maxWaitersPerLock at least 1
     * @return this builder
     */
    public FencedLockClientBuilder maxWaitersPerLock(int maxWaitersPerLock) {
        if (maxWaitersPerLock < 1) {
            throw new IllegalArgumentException("maxWaitersPerLock must be at least 1, was " + maxWaitersPerLock);
        }
        this.maxWaitersPerLock = maxWaitersPerLock;
        return this;
    }

    /**
     * The holder label: a description of this instance that the client stores with every grant, so that the
     * {@linkplain FencedLockClient#locks(String) fleet view} of every instance can say who holds a lock (the owner
     * id, a capability, is never shown). Default: {@link #defaultHolderLabel(String) defaultHolderLabel(null)},
     * the host and the process id. It costs one write per grant and nothing per renewal: on Redis a key
     * {@code prefix{name}:holder} holding {@code token label} (it never expires, like the token counter, and is
     * shown only while the lock holds that token); on PostgreSQL the row's {@code holder} column.
     *
     * @param label not blank, at most {@value #MAX_HOLDER_LABEL_LENGTH} characters, no control characters, Unicode
     *     format characters (such as U+202E) or line/paragraph separators (U+2028, U+2029)
     * @return this builder
     * @throws IllegalArgumentException if the label is blank, too long or has such characters
     */
    public FencedLockClientBuilder holderLabel(String label) {
        Objects.requireNonNull(label, "holderLabel must not be null");
        String problem = HolderLabels.problemWith(label);
        if (!problem.isEmpty()) {
            throw new IllegalArgumentException(problem);
        }
        this.holderLabel = label;
        return this;
    }

    /**
     * Stores no holder label with grants: the acquire writes nothing more than the lock and its counter, and the
     * fleet view shows no holder for this client's locks. Undone by {@link #holderLabel(String)}.
     *
     * @return this builder
     */
    public FencedLockClientBuilder noHolderLabel() {
        this.holderLabel = "";
        return this;
    }

    /**
     * The default holder label: {@code application@host (pid N)}, or {@code host (pid N)} without an application
     * name. The host is the {@code HOSTNAME} (or {@code COMPUTERNAME}) environment variable, else the local host
     * name, looked up once per JVM (it may block on a name lookup: not on an event loop). Control characters
     * become {@code ?}, and the label is cut to {@value #MAX_HOLDER_LABEL_LENGTH} characters.
     *
     * @param applicationName the application's name (the starter passes {@code spring.application.name}), or
     *     {@code null}
     * @return the label
     */
    public static String defaultHolderLabel(@Nullable String applicationName) {
        return HolderLabels.defaultLabel(applicationName);
    }

    /**
     * Builds the client. No connection is made until the first command needs one. Without a
     * {@linkplain #holderLabel(String) holder label} set (nor {@link #noHolderLabel()}), it computes the default one,
     * whose host name is looked up once per JVM.
     *
     * @return a new client
     * @throws IllegalStateException if no Redis address (nor PostgreSQL) was given, replica acknowledgement was
     *     asked of PostgreSQL, the renewal period or command timeout
     *     is not shorter than the lease time, or the replica acknowledgement timeout not shorter than the
     *     command timeout
     */
    public FencedLockClient build() {
        StoreTarget where = target;
        if (where == null) {
            throw new IllegalStateException("A Redis address is required: call redisUri(...), redisClient(...), "
                    + "redisCluster(...) or redisClusterClient(...); or postgres(...) for locks on PostgreSQL");
        }
        if (replicaAcks.required() && !(where instanceof StoreTarget.Redis)) {
            throw new IllegalStateException("replicaAcknowledgement(...) applies to Redis only; PostgreSQL's replication "
                    + "is the database's (synchronous_commit)");
        }
        ClientSettings settings = ClientSettings.of(keyPrefix, leaseTime, renewalPeriod, maxWait, commandTimeout, scheduler)
                .withObserver(observer)
                .withTokenScheme(tokenScheme)
                .withMaxWaitersPerLock(maxWaitersPerLock)
                .withEmissionScheduler(emissionScheduler)
                .withMaxHold(maxHold);
        if (replicaAcks.timeout().compareTo(settings.commandTimeout()) >= 0) {
            if (settings.ownsScheduler()) {
                settings.scheduler().dispose();
            }
            throw new IllegalStateException("The replica acknowledgement timeout (" + replicaAcks.timeout()
                    + ") must be shorter than the command timeout (" + settings.commandTimeout() + "): WAIT is a command");
        }
        String label = holderLabel == null ? HolderLabels.defaultLabel(null) : holderLabel;
        return LeasingLockClient.create(where.open(settings, replicaAcks, label.isEmpty() ? null : label), settings);
    }
}
