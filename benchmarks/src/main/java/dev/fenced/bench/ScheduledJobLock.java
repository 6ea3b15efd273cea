package dev.fenced.bench;

import dev.fenced.lock.FencedLockClient;
import dev.fenced.shedlock.FencedLockProvider;
import io.lettuce.core.RedisURI;
import java.util.Set;
import net.javacrumbs.shedlock.core.DefaultLockingTaskExecutor;
import net.javacrumbs.shedlock.core.LockingTaskExecutor;
import net.javacrumbs.shedlock.provider.redis.spring.RedisLockProvider;
import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

/**
 * A lock behind ShedLock's {@code LockingTaskExecutor}, as a {@code @SchedulerLock} job uses it: each tick is one
 * {@code executeWithLock}. Fenced through {@link FencedLockProvider}, or ShedLock's own Redis provider.
 */
final class ScheduledJobLock implements AutoCloseable {

    static final String FENCED = "Fenced (FencedLockProvider)";
    static final String SHEDLOCK = "ShedLock RedisLockProvider";

    private final String label;
    private final LockingTaskExecutor executor;
    private final Set<String> requestCommands;
    private final AutoCloseable resource;

    private ScheduledJobLock(String label, LockingTaskExecutor executor, Set<String> requestCommands, AutoCloseable resource) {
        this.label = label;
        this.executor = executor;
        this.requestCommands = requestCommands;
        this.resource = resource;
    }

    /** Fenced with default settings behind the ShedLock adapter. Its requests are scripts and pub/sub commands. */
    static ScheduledJobLock fenced(String redisUri, String prefix) {
        FencedLockClient client = FencedLockClient.builder().redisUri(redisUri).keyPrefix(prefix).build();
        return new ScheduledJobLock(FENCED, new DefaultLockingTaskExecutor(FencedLockProvider.of(client)),
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
        return new ScheduledJobLock(SHEDLOCK, new DefaultLockingTaskExecutor(provider),
                Set.of("set", "del", "pexpire", "evalsha", "eval"), factory::destroy);
    }

    String label() {
        return label;
    }

    LockingTaskExecutor executor() {
        return executor;
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
