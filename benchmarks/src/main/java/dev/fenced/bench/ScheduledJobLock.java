package dev.fenced.bench;

import dev.fenced.lock.FencedJob;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.JobOutcome;
import dev.fenced.shedlock.FencedLockProvider;
import io.lettuce.core.RedisURI;
import java.time.Duration;
import java.time.Instant;
import java.util.Set;
import net.javacrumbs.shedlock.core.DefaultLockingTaskExecutor;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.LockingTaskExecutor;
import net.javacrumbs.shedlock.provider.redis.spring.RedisLockProvider;
import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import reactor.core.publisher.Mono;

/**
 * How a scheduled job takes its lock at each tick: Fenced's job API ({@code runJob}), or ShedLock's
 * {@code LockingTaskExecutor} (as a {@code @SchedulerLock} job uses it) over Fenced's {@link FencedLockProvider} or
 * over ShedLock's own Redis provider. Each tick runs an empty task under the lock, at most for 30 s, at least for 0.
 */
final class ScheduledJobLock implements AutoCloseable {

    static final String FENCED_JOB = "Fenced job (runJob)";
    static final String FENCED = "Fenced (FencedLockProvider)";
    static final String SHEDLOCK = "ShedLock RedisLockProvider";

    /** One tick of the job named {@code job}: whether the task ran. */
    interface Tick {
        boolean run(String job) throws Throwable;
    }

    private final String label;
    private final Tick tick;
    private final Set<String> requestCommands;
    private final AutoCloseable resource;

    private ScheduledJobLock(String label, Tick tick, Set<String> requestCommands, AutoCloseable resource) {
        this.label = label;
        this.tick = tick;
        this.requestCommands = requestCommands;
        this.resource = resource;
    }

    /** Fenced's job API with default client settings: {@code runJob} of an empty {@code Mono}, waited for. */
    static ScheduledJobLock fencedJob(String redisUri, String prefix) {
        FencedLockClient client = FencedLockClient.builder().redisUri(redisUri).keyPrefix(prefix).build();
        return new ScheduledJobLock(FENCED_JOB, job -> {
            FencedJob tick = FencedJob.of(job, Duration.ofSeconds(30));
            JobOutcome outcome;
            do {
                outcome = client.runJob(tick, Mono.empty()).block(Duration.ofSeconds(30));
                // runJob emits its outcome before it forgets the tick (its doFinally runs after the subscriber's
                // onComplete), so a tick started the moment block() returns can be skipped as "still running" in
                // this client. Such a skip sends nothing to Redis; try again.
            } while (outcome != null && outcome.status() == JobOutcome.Status.SKIPPED
                    && outcome.reason().startsWith("a tick of this job is still running"));
            if (outcome == null || outcome.status() != JobOutcome.Status.RAN) {
                throw new IllegalStateException("tick of " + job + ": " + outcome);
            }
            return true;
        }, Set.of("evalsha", "eval", "subscribe", "unsubscribe"), client);
    }

    /** A tick through ShedLock's executor: whether it executed the task. */
    private static Tick through(LockingTaskExecutor executor) {
        return job -> executor.executeWithLock(() -> true,
                new LockConfiguration(Instant.now(), job, Duration.ofSeconds(30), Duration.ZERO)).wasExecuted();
    }

    /** Fenced with default settings behind the ShedLock adapter. Its requests are scripts and pub/sub commands. */
    static ScheduledJobLock fenced(String redisUri, String prefix) {
        FencedLockClient client = FencedLockClient.builder().redisUri(redisUri).keyPrefix(prefix).build();
        return new ScheduledJobLock(FENCED, through(new DefaultLockingTaskExecutor(FencedLockProvider.of(client))),
                Set.of("evalsha", "eval", "subscribe", "unsubscribe"), client);
    }

    /**
     * ShedLock's Redis provider with its defaults ({@code SET NX PX} to lock, {@code DEL} to unlock, no scripts), on
     * Spring Data Redis's Lettuce connection factory. Every command it sends is a request.
     */
    static ScheduledJobLock shedLock(String redisUri, String prefix) {
        RedisURI uri = RedisURI.create(redisUri);
        LettuceConnectionFactory factory = new LettuceConnectionFactory(
                new RedisStandaloneConfiguration(uri.getHost(), uri.getPort()));
        factory.afterPropertiesSet();
        factory.start();
        RedisLockProvider provider = new RedisLockProvider(factory, "bench", prefix + "job-lock");
        return new ScheduledJobLock(SHEDLOCK, through(new DefaultLockingTaskExecutor(provider)),
                Set.of("set", "del", "pexpire", "evalsha", "eval"), factory::destroy);
    }

    String label() {
        return label;
    }

    /** Runs one tick; whether the task ran. */
    boolean tick(String job) {
        try {
            return tick.run(job);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable e) {
            throw new IllegalStateException(e);
        }
    }

    /** The commands that count as round trips from this lock (the others ran inside its scripts). */
    Set<String> requestCommands() {
        return requestCommands;
    }

    @Override
    public void close() {
        try {
            resource.close();
        } catch (Exception e) {
            throw new IllegalStateException("Could not close " + label, e);
        }
    }
}
