package dev.fenced.bench;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.reactive.RedisReactiveCommands;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.NettyCustomizer;
import io.netty.channel.Channel;
import io.netty.handler.flush.FlushConsolidationHandler;
import java.util.concurrent.atomic.AtomicLong;
import reactor.core.publisher.Mono;

/**
 * The floor any Redis lock with fencing tokens pays: one script that sets the lock if absent and increments
 * a counter, one that deletes the lock if it still holds our value. No renewal, no waiting, no loss tracking.
 *
 * <p>Two floors: the naive lock on a Lettuce client with its default resources, and the same lock with the
 * flushes of a read consolidated as Fenced's own Lettuce clients do (Netty's {@code FlushConsolidationHandler},
 * going out every 16 flushes): commands that reply callbacks send while a read is decoded leave together. The second is the
 * floor of the transport Fenced uses; the first is what a naive lock gets.
 */
final class BareLettuceLock implements LockUnderTest {

    static final String ACQUIRE = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
            + "return redis.call('INCR', KEYS[2]) end return 0";
    static final String RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

    private final ClientResources resources;
    private final boolean consolidated;
    private final RedisClient client;
    private final StatefulRedisConnection<String, String> connection;
    private final RedisReactiveCommands<String, String> redis;
    private final String acquireSha;
    private final String releaseSha;
    private final String prefix;
    private final AtomicLong owners = new AtomicLong();

    /** The label of the floor with consolidated flushes. */
    static final String CONSOLIDATED = "bare lock, flushes consolidated";

    BareLettuceLock(String redisUri, String prefix, boolean consolidateFlushes) {
        this.consolidated = consolidateFlushes;
        ClientResources.Builder builder = ClientResources.builder();
        if (consolidateFlushes) {
            builder.nettyCustomizer(new NettyCustomizer() {
                @Override
                public void afterChannelInitialized(Channel channel) {
                    channel.pipeline().addFirst(new FlushConsolidationHandler(16, false));
                }
            });
        }
        this.resources = builder.build();
        this.client = RedisClient.create(resources, RedisURI.create(redisUri));
        this.connection = client.connect();
        this.redis = connection.reactive();
        this.acquireSha = connection.sync().scriptLoad(ACQUIRE);
        this.releaseSha = connection.sync().scriptLoad(RELEASE);
        this.prefix = prefix;
    }

    @Override
    public String label() {
        return consolidated ? CONSOLIDATED : "bare Lettuce lock";
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
        resources.shutdown();
    }
}
