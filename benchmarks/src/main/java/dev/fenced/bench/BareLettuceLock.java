package dev.fenced.bench;

import io.lettuce.core.RedisClient;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.reactive.RedisReactiveCommands;
import java.util.concurrent.atomic.AtomicLong;
import reactor.core.publisher.Mono;

/**
 * The floor any Redis lock with fencing tokens pays: one script that sets the lock if absent and increments
 * a counter, one that deletes the lock if it still holds our value. No renewal, no waiting, no loss tracking.
 */
final class BareLettuceLock implements LockUnderTest {

    static final String ACQUIRE = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
            + "return redis.call('INCR', KEYS[2]) end return 0";
    static final String RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

    private final RedisClient client;
    private final StatefulRedisConnection<String, String> connection;
    private final RedisReactiveCommands<String, String> redis;
    private final String acquireSha;
    private final String releaseSha;
    private final String prefix;
    private final AtomicLong owners = new AtomicLong();

    BareLettuceLock(String redisUri, String prefix) {
        this.client = RedisClient.create(redisUri);
        this.connection = client.connect();
        this.redis = connection.reactive();
        this.acquireSha = connection.sync().scriptLoad(ACQUIRE);
        this.releaseSha = connection.sync().scriptLoad(RELEASE);
        this.prefix = prefix;
    }

    @Override
    public String label() {
        return "bare Lettuce lock";
    }

    @Override
    public Mono<Void> pair(String name) {
        String key = prefix + "{" + name + "}";
        String owner = "o" + owners.incrementAndGet();
        return redis.<Long>evalsha(acquireSha, ScriptOutputType.INTEGER, new String[] {key, key + ":fence"}, owner, "30000")
                .next()
                .flatMap(token -> token == 0L
                        ? Mono.<Void>error(BenchmarkException.notAcquired(label(), name))
                        : redis.<Long>evalsha(releaseSha, ScriptOutputType.INTEGER, new String[] {key}, owner).then());
    }

    @Override
    public void close() {
        connection.close();
        client.shutdown();
    }
}
