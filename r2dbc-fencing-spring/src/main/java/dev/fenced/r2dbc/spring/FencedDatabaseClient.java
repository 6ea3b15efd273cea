package dev.fenced.r2dbc.spring;

import dev.fenced.lock.FencedLease;
import dev.fenced.r2dbc.FenceTable;
import dev.fenced.r2dbc.FencedWrite;
import io.r2dbc.spi.Readable;
import java.util.Objects;
import java.util.function.Function;
import org.springframework.r2dbc.core.DatabaseClient;
import reactor.core.publisher.Mono;

/**
 * Fenced writes, claims and fence advances through Spring's {@link DatabaseClient}: each runs on the client's
 * connection, which is the connection of the subscriber's transaction when there is one
 * ({@code TransactionalOperator.transactional(...)}, {@code @Transactional}), so it commits or rolls back with
 * the transaction, and a stale token fails it; outside a transaction the client hands out a connection in
 * auto-commit mode, on which a write commits on its own and a fence advance is refused. The errors are those of the
 * fenced statements ({@link FencedWrite}, {@link FenceTable}), at every isolation level: a refusal is explained by a
 * locking read, and a write the database cannot serialize fails with
 * {@link dev.fenced.r2dbc.FencedWriteConflictException}.
 *
 * <pre>{@code
 * FencedDatabaseClient fenced = FencedDatabaseClient.of(databaseClient);
 * databaseClient.sql("INSERT INTO ledger (invoice_id, amount) VALUES (42, 1200)").fetch().rowsUpdated()
 *         .then(fenced.update(settle, lease))
 *         .as(transactionalOperator::transactional);
 * }</pre>
 *
 * <p>A write or fence with a lease check ({@link FencedWrite#checkLease}, {@link FenceTable#checkLease}) checks the
 * lease on the same connection, so in the same transaction; outside a transaction it is refused with
 * {@link IllegalStateException} before any SQL, as a fence advance is.
 *
 * <p>Needs only {@code spring-r2dbc} (Spring Data is not needed). Every method is cold. Immutable and thread-safe.
 */
public final class FencedDatabaseClient {

    private final DatabaseClient client;

    private FencedDatabaseClient(DatabaseClient client) {
        this.client = client;
    }

    /**
     * Fenced operations on the connections of {@code client}.
     *
     * @param client the client
     * @return the fenced client
     */
    public static FencedDatabaseClient of(DatabaseClient client) {
        return new FencedDatabaseClient(Objects.requireNonNull(client, "client must not be null"));
    }

    /**
     * Runs the write's guarded update ({@link FencedWrite#update(io.r2dbc.spi.Connection, FencedLease)}).
     *
     * @param write the write
     * @param lease the lease whose token it carries
     * @return the rows updated; the errors of the fenced update
     */
    public Mono<Long> update(FencedWrite write, FencedLease lease) {
        Objects.requireNonNull(write, "write must not be null");
        return client.inConnection(c -> write.update(c, lease));
    }

    /**
     * Runs the write's guarded upsert ({@link FencedWrite#upsert(io.r2dbc.spi.Connection, FencedLease)}).
     *
     * @param write the write
     * @param lease the lease whose token it carries
     * @return the rows inserted or updated (1); the errors of the fenced upsert
     */
    public Mono<Long> upsert(FencedWrite write, FencedLease lease) {
        Objects.requireNonNull(write, "write must not be null");
        return client.inConnection(c -> write.upsert(c, lease));
    }

    /**
     * The claim step of a read-modify-write ({@link FencedWrite#claim(io.r2dbc.spi.Connection, FencedLease, Function)}).
     *
     * @param write the write whose key names the row
     * @param lease the lease whose token claims the row
     * @param mapper maps the row read after the claim
     * @param <T> the type of the mapped row
     * @return the row as claimed
     */
    public <T> Mono<T> claim(FencedWrite write, FencedLease lease, Function<? super Readable, ? extends T> mapper) {
        Objects.requireNonNull(write, "write must not be null");
        return client.inConnection(c -> write.claim(c, lease, mapper));
    }

    /**
     * Advances the fence of the lease's lock ({@link FenceTable#advance(io.r2dbc.spi.Connection, FencedLease)}):
     * compose it first in the transaction whose statements it protects. Outside a transaction it is refused with
     * {@link IllegalStateException}, since the fence would protect nothing.
     *
     * @param fence the fence table
     * @param lease the lease
     * @return completion; the errors of the advance
     */
    public Mono<Void> advance(FenceTable fence, FencedLease lease) {
        Objects.requireNonNull(fence, "fence must not be null");
        return client.inConnection(c -> fence.advance(c, lease));
    }

    @Override
    public String toString() {
        return "FencedDatabaseClient{" + client + "}";
    }
}
