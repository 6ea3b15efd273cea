package dev.fenced.r2dbc;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.PostgresLeaseTable;
import io.r2dbc.spi.Connection;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The lease check of a fenced write ({@link FencedWrite#checkLease}, {@link FenceTable#checkLease}): in the write's
 * transaction, before the write, the lease's row in the lease table of a PostgreSQL lock client must hold the
 * lease's owner and token and be unexpired by the database's clock, and is locked {@code FOR KEY SHARE} until the
 * transaction ends.
 *
 * <p>Why {@code FOR KEY SHARE}: the store's acquire locks a row {@code FOR UPDATE}, the one mode that conflicts
 * with it, so no acquire grants the lock to another owner before the write commits (or rolls back); the holder's
 * renewals and releases update non-key columns ({@code FOR NO KEY UPDATE}), which does not conflict, so they never
 * wait for a write transaction and cannot deadlock with one. {@code FOR SHARE} would also stop acquires, but every
 * renewal of the client (one statement for all its leases) would wait for the longest open write, and a
 * transaction that checks two leases could deadlock with that renewal. Under {@code REPEATABLE READ} the check reads
 * the transaction's snapshot; a grant committed after it is a key update (the acquire's {@code FOR UPDATE}), so the
 * row lock fails to serialize (SQLSTATE {@code 40001}, which the write reports as {@link FencedWriteConflictException})
 * rather than pass on the older row.
 *
 * <p>Immutable and thread-safe.
 */
final class LeaseCheck {

    private final PostgresLeaseTable table;
    private final String checkSql;
    private final String explainSql;

    private LeaseCheck(PostgresLeaseTable table) {
        this.table = table;
        String quoted = SqlDialect.POSTGRESQL.quote(table.name());
        this.checkSql = "SELECT 1 FROM " + quoted + " WHERE lock_id = $1 AND owner = $2 AND token = $3"
                + " AND expires_at > clock_timestamp() FOR KEY SHARE";
        this.explainSql = "SELECT owner, token FROM " + quoted + " WHERE lock_id = $1";
    }

    static LeaseCheck of(PostgresLeaseTable table) {
        return new LeaseCheck(Objects.requireNonNull(table, "lease table must not be null"));
    }

    /**
     * Checks the lease on {@code connection}, which must be a PostgreSQL connection in a transaction.
     *
     * @param connection the write's connection
     * @param lease the lease the write carries
     * @param what the write, as the start of error messages
     * @return completion once the row is checked and locked; {@link LeaseCheckFailedException} when the table does
     *     not show the lease as held; {@link IllegalStateException}, sending nothing, on another database or on a
     *     connection in auto-commit mode
     */
    Mono<Void> verify(Connection connection, FencedLease lease, String what) {
        return Mono.defer(() -> {
            String product = connection.getMetadata().getDatabaseProductName();
            if (SqlDialect.of(connection) != SqlDialect.POSTGRESQL) {
                return Mono.error(new IllegalStateException(what + " checks its lease in lease table " + table.name()
                        + " (checkLease), which runs on PostgreSQL only; this connection is to " + product));
            }
            if (connection.isAutoCommit()) {
                // Checked in a transaction of its own, the lease could be granted to another owner before the write.
                return Mono.error(new IllegalStateException(what + " checks its lease (checkLease) and needs a transaction: "
                        + "the connection is in auto-commit mode; begin a transaction first, or pass the ConnectionFactory"));
            }
            return Flux.from(connection.createStatement(checkSql).bind(0, lease.lockId()).bind(1, lease.ownerId())
                            .bind(2, lease.token()).execute())
                    .flatMap(result -> result.map((row, meta) -> Boolean.TRUE))
                    .hasElements()
                    .onErrorMap(e -> SqlErrors.classify(e, schemaDescription()))
                    .flatMap(held -> held ? Mono.<Void>empty() : refused(connection, lease));
        });
    }

    /** The row does not show the lease: read what it holds instead, for the error. */
    private Mono<Void> refused(Connection connection, FencedLease lease) {
        return Flux.from(connection.createStatement(explainSql).bind(0, lease.lockId()).execute())
                .flatMap(result -> result.map((row, meta) -> {
                    String owner = row.get("owner", String.class);
                    Long token = row.get("token", Long.class);
                    return failure(lease, owner == null ? LeaseCheckFailedException.Finding.FREE
                            : owner.equals(lease.ownerId()) && token != null && token == lease.token()
                                    ? LeaseCheckFailedException.Finding.EXPIRED
                                    : LeaseCheckFailedException.Finding.OTHER_GRANT, token);
                }))
                .next()
                .defaultIfEmpty(failure(lease, LeaseCheckFailedException.Finding.NO_ROW, null))
                .onErrorMap(e -> SqlErrors.classify(e, schemaDescription()))
                .flatMap(Mono::error);
    }

    private LeaseCheckFailedException failure(FencedLease lease, LeaseCheckFailedException.Finding finding,
            @Nullable Long storedToken) {
        return LeaseCheckFailedException.of(lease.name(), lease.lockId(), lease.token(), table.name(), finding, storedToken);
    }

    private String schemaDescription() {
        return "the lease table " + SqlDialect.POSTGRESQL.quote(table.name()) + " in the write's database (create it with "
                + "PostgresLeaseTable.create)";
    }

    /** The checked table, for {@code toString}. */
    String tableName() {
        return table.name();
    }
}
