package dev.fenced.demo;

import io.lettuce.core.RedisURI;
import io.netty.channel.EventLoopGroup;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryOptions;
import io.r2dbc.spi.Option;
import org.springframework.core.env.Environment;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * One paused-able process of the demo: its own way to Redis and to PostgreSQL, each through a
 * {@link StallableRelay}, so that {@link #stall()} pauses it as a whole (as a long GC pause or a network stall
 * would) without touching the servers or the other workers. Worker A of the scenario and each instance of the
 * scheduled job run on one. Thread-safe.
 */
final class RelayedServices {

    private final RedisURI redis;
    private final ConnectionFactory database;
    private final StallableRelay redisRelay;
    private final StallableRelay postgresRelay;

    private RelayedServices(RedisURI redis, ConnectionFactory database, StallableRelay redisRelay,
            StallableRelay postgresRelay) {
        this.redis = redis;
        this.database = database;
        this.redisRelay = redisRelay;
        this.postgresRelay = postgresRelay;
    }

    /**
     * Opens relays to the application's Redis ({@code redis}) and PostgreSQL ({@code spring.r2dbc.*}); emits on a
     * bounded-elastic thread, since what the caller builds next (a lock client, the R2DBC driver lookup) may block.
     */
    static Mono<RelayedServices> open(EventLoopGroup relayLoop, RedisURI redis, Environment environment) {
        ConnectionFactoryOptions postgres = postgresOptions(environment);
        String postgresHost = postgres.getRequiredValue(ConnectionFactoryOptions.HOST).toString();
        Object postgresPort = postgres.getValue(ConnectionFactoryOptions.PORT);
        int port = postgresPort == null ? 5432 : Integer.parseInt(postgresPort.toString());
        return Mono.zip(StallableRelay.open(relayLoop, redis.getHost(), redis.getPort()),
                        StallableRelay.open(relayLoop, postgresHost, port))
                // Looking up the R2DBC driver reads jar files: not on an event loop.
                .publishOn(Schedulers.boundedElastic())
                .flatMap(relays -> Mono.fromCallable(() -> {
                    RedisURI viaRelay = RedisURI.create(redis.toURI().toString());
                    viaRelay.setHost("127.0.0.1");
                    viaRelay.setPort(relays.getT1().port());
                    ConnectionFactoryOptions.Builder options = ConnectionFactoryOptions.builder()
                            .option(ConnectionFactoryOptions.DRIVER, "postgresql")
                            .option(ConnectionFactoryOptions.HOST, "127.0.0.1")
                            .option(ConnectionFactoryOptions.PORT, relays.getT2().port());
                    copy(postgres, options, ConnectionFactoryOptions.DATABASE);
                    copy(postgres, options, ConnectionFactoryOptions.USER);
                    copy(postgres, options, ConnectionFactoryOptions.PASSWORD);
                    return new RelayedServices(viaRelay, ConnectionFactories.get(options.build()), relays.getT1(),
                            relays.getT2());
                }).onErrorResume(e -> relays.getT1().close().then(relays.getT2().close()).then(Mono.error(e))));
    }

    /** Redis, through this process's relay. */
    RedisURI redis() {
        return redis;
    }

    /** PostgreSQL, through this process's relay: every connection it creates can be stalled. */
    ConnectionFactory database() {
        return database;
    }

    /** Pauses this process's traffic to both servers; what it sends meanwhile waits on the wire. */
    void stall() {
        redisRelay.stall();
        postgresRelay.stall();
    }

    /** Moves the traffic again; what waited is delivered in order. */
    void resume() {
        redisRelay.resume();
        postgresRelay.resume();
    }

    /** Resumes, then closes both relays and their connections. */
    Mono<Void> close() {
        return Mono.defer(() -> {
            resume();
            return redisRelay.close().then(postgresRelay.close());
        });
    }

    private static ConnectionFactoryOptions postgresOptions(Environment environment) {
        String url = environment.getRequiredProperty("spring.r2dbc.url");
        ConnectionFactoryOptions.Builder options = ConnectionFactoryOptions.parse(url).mutate();
        String user = environment.getProperty("spring.r2dbc.username");
        String password = environment.getProperty("spring.r2dbc.password");
        if (user != null) {
            options.option(ConnectionFactoryOptions.USER, user);
        }
        if (password != null) {
            options.option(ConnectionFactoryOptions.PASSWORD, password);
        }
        return options.build();
    }

    @SuppressWarnings("unchecked")
    private static void copy(ConnectionFactoryOptions from, ConnectionFactoryOptions.Builder to, Option<?> option) {
        Object value = from.getValue(option);
        if (value != null) {
            to.option((Option<Object>) option, value);
        }
    }
}
