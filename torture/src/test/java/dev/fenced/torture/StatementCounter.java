package dev.fenced.torture;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryMetadata;
import io.r2dbc.spi.R2dbcException;
import io.r2dbc.spi.Result;
import io.r2dbc.spi.Statement;
import io.r2dbc.spi.Wrapped;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiFunction;
import java.util.function.Function;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * What the PostgreSQL lease store really sent, seen from outside it: a {@link ConnectionFactory} that wraps the client's
 * pool and counts, by the SQL text of each statement the store creates, the statements of each kind it executed, how
 * many completed, failed (and of those, with SQLSTATE {@code 40P01}, "deadlock detected"), the rows they returned and,
 * for the multi-row statements, how many locks they carried (the length of the first array bound). Connections are
 * wrapped with {@link Wrapped}, so the store still reaches r2dbc-postgresql's connection for {@code LISTEN} and cancels.
 * Thread-safe.
 */
final class StatementCounter {

    /** The store's statements, told apart by their SQL text (the texts of {@code PostgresLeaseStore}). */
    enum Kind {
        /** Several acquires in one statement ({@code acquireManySql}). */
        SHARED_ACQUIRE,
        /** Several releases in one statement ({@code releaseManySql}). */
        SHARED_RELEASE,
        /** The one-statement hand-off to a waiter of the same client ({@code handOffSql}); a row when it took effect. */
        HAND_OFF,
        /** One acquire. */
        ACQUIRE,
        /** One release. */
        RELEASE,
        /** A renewal of the client's held leases. */
        RENEW,
        /** Anything else ({@code LISTEN}, pings, listings). */
        OTHER;

        static Kind of(String sql) {
            if (sql.contains("AS r(lock_id, owner, ms, floor, i)")) {
                return SHARED_ACQUIRE;
            }
            if (sql.contains("AS r(lock_id, owner, token, i)")) {
                return SHARED_RELEASE;
            }
            if (sql.contains("AS r(lock_id, owner, token, ms, i)")) {
                return RENEW;
            }
            if (sql.contains("FOR UPDATE SKIP LOCKED) INSERT")) {
                return HAND_OFF;
            }
            if (sql.contains("ON CONFLICT (lock_id)")) {
                return ACQUIRE;
            }
            if (sql.contains("released AS (UPDATE")) {
                return RELEASE;
            }
            return OTHER;
        }
    }

    /** The counts of one kind. */
    static final class Counts {
        final AtomicLong executed = new AtomicLong();
        final AtomicLong completed = new AtomicLong();
        final AtomicLong failed = new AtomicLong();
        final AtomicLong deadlocks = new AtomicLong();
        final AtomicLong rows = new AtomicLong();
        /** Locks carried by the executed statements of a multi-row kind (the first array's length). */
        final AtomicLong members = new AtomicLong();
        /** Statements of a multi-row kind that carried more than one lock, and completed. */
        final AtomicLong completedWithSeveral = new AtomicLong();

        @Override
        public String toString() {
            return "executed " + executed + ", completed " + completed + " (" + completedWithSeveral
                    + " with several locks), failed " + failed + " (deadlocks " + deadlocks + "), rows " + rows
                    + ", locks carried " + members;
        }
    }

    private final Map<Kind, Counts> counts = new EnumMap<>(Kind.class);

    StatementCounter() {
        for (Kind kind : Kind.values()) {
            counts.put(kind, new Counts());
        }
    }

    Counts of(Kind kind) {
        return counts.get(kind);
    }

    /** Every kind's counts, for the log. */
    String describe() {
        StringBuilder s = new StringBuilder();
        counts.forEach((kind, c) -> s.append("\n  ").append(kind).append(": ").append(c));
        return s.toString();
    }

    /** {@code delegate}, counted. */
    ConnectionFactory wrap(ConnectionFactory delegate) {
        return new CountingFactory(delegate);
    }

    private final class CountingFactory implements ConnectionFactory, Wrapped<ConnectionFactory> {

        private final ConnectionFactory delegate;

        CountingFactory(ConnectionFactory delegate) {
            this.delegate = delegate;
        }

        @Override
        public Publisher<? extends Connection> create() {
            return Mono.from(delegate.create()).map(StatementCounter.this::connection);
        }

        @Override
        public ConnectionFactoryMetadata getMetadata() {
            return delegate.getMetadata();
        }

        @Override
        public ConnectionFactory unwrap() {
            return delegate;
        }
    }

    private Connection connection(Connection delegate) {
        return proxy(Connection.class, delegate, new Class<?>[] {Connection.class, Wrapped.class}, (self, method, args) -> {
            if (method.getName().equals("unwrap") && method.getParameterCount() == 0) {
                return delegate;
            }
            Object value = invoke(delegate, method, args);
            if (method.getName().equals("createStatement") && value instanceof Statement statement) {
                return statement(statement, Kind.of((String) args[0]));
            }
            return value == delegate ? self : value;
        });
    }

    private Statement statement(Statement delegate, Kind kind) {
        Counts c = counts.get(kind);
        AtomicLong carried = new AtomicLong(1);
        return proxy(Statement.class, delegate, new Class<?>[] {Statement.class}, (self, method, args) -> {
            if (method.getName().equals("bind") && args != null && args.length == 2 && Integer.valueOf(0).equals(args[0])
                    && args[1] instanceof Object[] array) {
                carried.set(array.length);
            }
            if (method.getName().equals("execute") && method.getParameterCount() == 0) {
                AtomicBoolean settled = new AtomicBoolean();
                Function<Throwable, Void> failed = e -> {
                    if (settled.compareAndSet(false, true)) {
                        c.failed.incrementAndGet();
                        if (isDeadlock(e)) {
                            c.deadlocks.incrementAndGet();
                        }
                    }
                    return null;
                };
                Runnable completed = () -> {
                    if (settled.compareAndSet(false, true)) {
                        c.completed.incrementAndGet();
                        if (carried.get() > 1 && (kind == Kind.SHARED_ACQUIRE || kind == Kind.SHARED_RELEASE)) {
                            c.completedWithSeveral.incrementAndGet();
                        }
                    }
                };
                @SuppressWarnings("unchecked")
                Publisher<? extends Result> results = (Publisher<? extends Result>) invoke(delegate, method, args);
                return Flux.from(results)
                        .doOnSubscribe(s -> {
                            c.executed.incrementAndGet();
                            if (kind == Kind.SHARED_ACQUIRE || kind == Kind.SHARED_RELEASE) {
                                c.members.addAndGet(carried.get());
                            }
                        })
                        .doOnError(failed::apply)
                        .map(result -> result(result, c, failed, completed));
            }
            Object value = invoke(delegate, method, args);
            return value == delegate ? self : value;
        });
    }

    private Result result(Result delegate, Counts c, Function<Throwable, Void> failed, Runnable completed) {
        return proxy(Result.class, delegate, new Class<?>[] {Result.class}, (self, method, args) -> {
            if (method.getName().equals("map") && args != null && args.length == 1) {
                Object mapper = args[0];
                Object counted;
                if (mapper instanceof BiFunction<?, ?, ?> two) {
                    @SuppressWarnings("unchecked")
                    BiFunction<Object, Object, Object> f = (BiFunction<Object, Object, Object>) two;
                    counted = (BiFunction<Object, Object, Object>) (row, meta) -> {
                        c.rows.incrementAndGet();
                        return f.apply(row, meta);
                    };
                } else {
                    @SuppressWarnings("unchecked")
                    Function<Object, Object> f = (Function<Object, Object>) mapper;
                    counted = (Function<Object, Object>) readable -> {
                        c.rows.incrementAndGet();
                        return f.apply(readable);
                    };
                }
                Publisher<?> rows = (Publisher<?>) invoke(delegate, method, new Object[] {counted});
                return Flux.from(rows).doOnError(failed::apply).doOnComplete(completed);
            }
            Object value = invoke(delegate, method, args);
            if (value instanceof Publisher<?> publisher && method.getName().equals("getRowsUpdated")) {
                return Flux.from(publisher).doOnError(failed::apply).doOnComplete(completed);
            }
            return value == delegate ? self : value;
        });
    }

    static boolean isDeadlock(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof R2dbcException sql && "40P01".equals(sql.getSqlState())) {
                return true;
            }
        }
        return false;
    }

    private static Object invoke(Object target, Method method, Object[] args) throws Throwable {
        try {
            return method.invoke(target, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }

    /** A proxy of {@code delegate} with {@code handler}; {@code equals} and {@code hashCode} by identity. */
    private static <T> T proxy(Class<T> type, T delegate, Class<?>[] interfaces, InvocationHandler handler) {
        Object proxy = Proxy.newProxyInstance(StatementCounter.class.getClassLoader(), interfaces, (self, method, args) -> {
            if (method.getDeclaringClass() == Object.class) {
                return switch (method.getName()) {
                    case "equals" -> self == args[0];
                    case "hashCode" -> System.identityHashCode(self);
                    case "toString" -> "counted " + delegate;
                    default -> invoke(delegate, method, args);
                };
            }
            return handler.invoke(self, method, args);
        });
        return type.cast(proxy);
    }
}
