package dev.fenced.r2dbc.spring;

import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryMetadata;
import io.r2dbc.spi.IsolationLevel;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Configuration;
import org.springframework.r2dbc.connection.R2dbcTransactionManager;
import org.springframework.r2dbc.connection.TransactionAwareConnectionFactoryProxy;
import org.springframework.transaction.ReactiveTransactionManager;
import org.springframework.transaction.annotation.EnableTransactionManagement;
import org.springframework.transaction.annotation.Isolation;
import org.springframework.transaction.annotation.Transactional;
import org.springframework.transaction.reactive.TransactionalOperator;
import org.springframework.transaction.support.DefaultTransactionDefinition;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The connection factories, transaction managers and Spring contexts of the environment matrix
 * ({@link EnvironmentMatrixIT}), one of each per database and session isolation level, created on first use and
 * shared by every cell of that environment, so that one server process serves all cells. Not thread-safe beyond
 * what JUnit's sequential cells need.
 */
final class Environments implements AutoCloseable {

    /** The transaction isolation levels of the matrix, as R2DBC and as Spring name them. */
    enum Level {
        READ_COMMITTED("READ COMMITTED", IsolationLevel.READ_COMMITTED, Isolation.READ_COMMITTED),
        REPEATABLE_READ("REPEATABLE READ", IsolationLevel.REPEATABLE_READ, Isolation.REPEATABLE_READ),
        SERIALIZABLE("SERIALIZABLE", IsolationLevel.SERIALIZABLE, Isolation.SERIALIZABLE);

        final String sql;
        final IsolationLevel r2dbc;
        final Isolation spring;

        Level(String sql, IsolationLevel r2dbc, Isolation spring) {
            this.sql = sql;
            this.r2dbc = r2dbc;
            this.spring = spring;
        }
    }

    /** A database of the matrix and the URL of its server. */
    record Database(String name, String r2dbcUrl, boolean mariaDb) {
    }

    private final Map<String, ConnectionPool> pools = new ConcurrentHashMap<>();
    private final Map<String, ConnectionFactory> plains = new ConcurrentHashMap<>();
    private final Map<String, Runner> runners = new ConcurrentHashMap<>();
    private final Map<String, AnnotationConfigApplicationContext> contexts = new ConcurrentHashMap<>();

    /** A pool whose connections run their transactions at {@code level} by default ({@code null}: the server's default). */
    ConnectionPool pool(Database db, @Nullable Level level) {
        return pools.computeIfAbsent(db.name() + level, key -> new ConnectionPool(ConnectionPoolConfiguration
                .builder(plain(db, level)).maxSize(4).build()));
    }

    /** The plain factory of {@code db} at {@code level}, one per pair. */
    ConnectionFactory plainFactory(Database db, @Nullable Level level) {
        return plains.computeIfAbsent(db.name() + level, key -> plain(db, level));
    }

    /** A plain factory (no pool, not Spring's): a new driver connection each time, with the session's default level. */
    private static ConnectionFactory plain(Database db, @Nullable Level level) {
        ConnectionFactory driver = ConnectionFactories.get(db.r2dbcUrl());
        return new ConnectionFactory() {
            @Override
            public Publisher<? extends Connection> create() {
                return level == null ? driver.create() : Mono.from(driver.create())
                        .flatMap(c -> Mono.from(c.setTransactionIsolationLevel(level.r2dbc)).thenReturn(c));
            }

            @Override
            public ConnectionFactoryMetadata getMetadata() {
                return driver.getMetadata();
            }

            @Override
            public String toString() {
                return "plain factory of " + db.name();
            }
        };
    }

    /** A transaction-aware proxy over {@code target}, the way Spring users hand a factory to non-Spring code. */
    static ConnectionFactory proxy(ConnectionFactory target) {
        return new TransactionAwareConnectionFactoryProxy(target);
    }

    /** A {@code TransactionalOperator} on {@code factory}, at {@code level} ({@code null}: the connection's default). */
    static TransactionalOperator operator(ConnectionFactory factory, @Nullable Level level) {
        DefaultTransactionDefinition definition = new DefaultTransactionDefinition();
        if (level != null) {
            definition.setIsolationLevel(level.spring.value());
        }
        return TransactionalOperator.create(new R2dbcTransactionManager(factory), definition);
    }

    /** The {@code @Transactional} bean of a Spring context whose transaction manager runs on {@code pool}. */
    Runner transactional(String key, ConnectionFactory pool) {
        return runners.computeIfAbsent(key, k -> {
            AnnotationConfigApplicationContext context = new AnnotationConfigApplicationContext();
            context.registerBean(ReactiveTransactionManager.class, () -> new R2dbcTransactionManager(pool));
            context.register(TransactionConfiguration.class);
            context.registerBean(Runner.class);
            context.refresh();
            contexts.put(k, context);
            return context.getBean(Runner.class);
        });
    }

    /** Enables {@code @Transactional} (class-based proxies, as Spring Boot does). */
    @Configuration(proxyBeanMethods = false)
    @EnableTransactionManagement(proxyTargetClass = true)
    static class TransactionConfiguration {
    }

    /** Reactive {@code @Transactional} methods, one per isolation level. */
    public static class Runner {

        /**
         * Runs the work in a transaction at the connection's default level.
         *
         * @param work the work
         * @return its results
         */
        @Transactional
        public Flux<Object> atDefault(Supplier<Flux<Object>> work) {
            return Flux.defer(work);
        }

        /**
         * Runs the work at READ COMMITTED.
         *
         * @param work the work
         * @return its results
         */
        @Transactional(isolation = Isolation.READ_COMMITTED)
        public Flux<Object> readCommitted(Supplier<Flux<Object>> work) {
            return Flux.defer(work);
        }

        /**
         * Runs the work at REPEATABLE READ.
         *
         * @param work the work
         * @return its results
         */
        @Transactional(isolation = Isolation.REPEATABLE_READ)
        public Flux<Object> repeatableRead(Supplier<Flux<Object>> work) {
            return Flux.defer(work);
        }

        /**
         * Runs the work at SERIALIZABLE.
         *
         * @param work the work
         * @return its results
         */
        @Transactional(isolation = Isolation.SERIALIZABLE)
        public Flux<Object> serializable(Supplier<Flux<Object>> work) {
            return Flux.defer(work);
        }
    }

    /** Runs {@code work} in the caller's own R2DBC transaction on a connection of {@code pool}. */
    static Flux<Object> ownTransaction(ConnectionFactory pool, @Nullable Level level, Function<Connection, Flux<Object>> work) {
        return Flux.usingWhen(pool.create(),
                c -> Flux.usingWhen(Mono.from(level == null ? c.beginTransaction() : c.beginTransaction(level.r2dbc)).thenReturn(c),
                        work,
                        Connection::commitTransaction,
                        (t, error) -> t.rollbackTransaction(),
                        Connection::rollbackTransaction),
                Connection::close);
    }

    @Override
    public void close() {
        contexts.values().forEach(AnnotationConfigApplicationContext::close);
        pools.values().forEach(pool -> pool.disposeLater().block(Duration.ofSeconds(10)));
    }
}
