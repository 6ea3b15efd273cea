package dev.fenced.torture;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.StaleFencingTokenException;
import dev.fenced.r2dbc.FencedWrite;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Result;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The system of record of the workload, in PostgreSQL (or MariaDB, {@link Writes#READ_FIRST_REPEATABLE_READ}): an account table (one balance per resource, with the
 * fencing token and owner columns) and an audit table with one row per committed increment, inserted in the
 * same transaction. The audit table's {@code id} is taken after the account row is locked by the increment,
 * so per resource it follows commit order.
 *
 * <p>How a step is guarded depends on the {@link Arm}: Fenced uses the library's {@link FencedWrite}; the
 * control arms use the SQL a user without the library might write. Blocking: called from worker threads.
 * Thread-safe.
 */
final class Ledger implements AutoCloseable {

    static final Duration STATEMENT_TIMEOUT = Duration.ofSeconds(10);

    /**
     * How the workers' writes reach the database. The fenced arms use it; the control arms always write in a
     * transaction of their own.
     */
    enum Writes {

        /** A transaction of the worker's own on a connection of the pool (or {@code -Dtorture.writes=spring}). */
        TRANSACTION,

        /**
         * As a Spring application whose non-Spring code gets a {@code TransactionAwareConnectionFactoryProxy}: inside
         * {@code TransactionalOperator.transactional} on the pool, the caller reads, then
         * {@code FenceTable.inTransaction} is given the proxy and runs the fenced update of the balance, then the
         * audit row goes through a {@code DatabaseClient} on the pool. In one write of {@value #CALLER_FAILS_ONE_IN}
         * the caller fails between the two (the outcome is unknown to the worker): the fenced step must roll back with
         * the rest, never commit half-way (a committed balance without its audit row breaks I2).
         */
        SPRING_PROXY,

        /**
         * MariaDB's default isolation: after the claim, the worker's write transaction begins at
         * {@code REPEATABLE READ} and reads the balance (fixing its snapshot); the worker's pause, a newer holder's
         * claim and write happen while it is open; then the fenced update and the audit row, and the commit. A refusal
         * explained from the snapshot (which shows the worker's own claim) would be reported as accepted, and the
         * stale holder's audit row would commit.
         */
        READ_FIRST_REPEATABLE_READ;

        /** How rarely the caller of {@link #SPRING_PROXY} fails after the fenced step. */
        static final int CALLER_FAILS_ONE_IN = 10;
    }

    final String accounts;
    final String audit;
    private final ConnectionPool pool;
    private final boolean mariaDb;
    private final Writes writes;

    private Ledger(String r2dbcUrl, String accounts, String audit, Writes writes) {
        ConnectionFactory raw = ConnectionFactories.get(r2dbcUrl);
        this.pool = new ConnectionPool(ConnectionPoolConfiguration.builder(raw).maxSize(24).build());
        this.accounts = accounts;
        this.audit = audit;
        this.mariaDb = r2dbcUrl.startsWith("r2dbc:mariadb:");
        this.writes = writes;
    }

    /** Creates fresh tables for one run of one scenario and arm. */
    static Ledger create(String r2dbcUrl, List<String> resources) {
        return create(r2dbcUrl, resources, Writes.TRANSACTION);
    }

    /** Creates fresh tables for one run of one scenario and arm, written as {@code writes} says. */
    static Ledger create(String r2dbcUrl, List<String> resources, Writes writes) {
        String suffix = UUID.randomUUID().toString().replace("-", "").substring(0, 12);
        Ledger ledger = new Ledger(r2dbcUrl, "torture_" + suffix + "_account", "torture_" + suffix + "_audit", writes);
        // MariaDB keys text by a bounded type and numbers rows with AUTO_INCREMENT.
        String text = ledger.mariaDb ? "varchar(255)" : "text";
        try {
            ledger.execute("CREATE TABLE " + ledger.accounts + " (id " + text + " PRIMARY KEY, balance bigint NOT NULL, "
                    + "fencing_token bigint, fencing_owner " + text + ", elements text)");
            ledger.execute("CREATE TABLE " + ledger.audit + " (id " + (ledger.mariaDb ? "bigint AUTO_INCREMENT" : "bigserial")
                    + " PRIMARY KEY, resource " + text + " NOT NULL, token bigint NOT NULL, owner " + text + " NOT NULL, "
                    + "op_id " + text + " NOT NULL UNIQUE)");
            for (String resource : resources) {
                ledger.execute("INSERT INTO " + ledger.accounts + " (id, balance) VALUES ('" + resource + "', 0)");
            }
            if (writes == Writes.SPRING_PROXY) {
                block(ledger.fence().create(ledger.pool).thenReturn(true));
            }
        } catch (RuntimeException e) {
            ledger.close();
            throw e;
        }
        return ledger;
    }

    /** Opens the tables of a run made by another process (the child JVM). */
    static Ledger open(String r2dbcUrl, String accounts, String audit) {
        return new Ledger(r2dbcUrl, accounts, audit, Writes.TRANSACTION);
    }

    /**
     * Claims the resource for the grant, then reads its balance. The claim moves the row's fence to the
     * grant's token first, so that once a newer holder has read, an older one can no longer write: fencing
     * the write alone cannot protect a read-modify-write whose stale writer commits before the newer
     * holder's write.
     *
     * @throws StaleFencingTokenException if storage holds a newer token (or the same token of another owner)
     */
    long claimAndRead(Arm arm, Grant grant) {
        return claimAndRead(arm, grant, grant.lease());
    }

    /**
     * Claims and reads as {@link #claimAndRead(Arm, Grant)} does, carrying {@code view}: the grant's own lease, or
     * a view that still believes it is held (the holder checked its lease, then paused before its first write).
     *
     * @throws StaleFencingTokenException if storage holds a newer token (or the same token of another owner)
     */
    long claimAndRead(Arm arm, Grant grant, @Nullable FencedLease view) {
        String resource = grant.resource();
        switch (arm) {
            case FENCED, FENCED_COUNTER, COUNTER_TOKENS, CLOCK_BEHIND -> block(FencedWrite.into(accounts).key("id", resource).update(pool, requireView(view)));
            case TOKEN_ONLY -> block(Mono.usingWhen(pool.create(),
                    c -> tokenOnly(c, grant, requireView(view), "fencing_token = $1, fencing_owner = $2", List.of()),
                    Connection::close));
            case PLAIN_TTL, UNFENCED_ROW, LEASE_CHECK -> {
                // No fencing: the lock is all there is.
            }
        }
        if (writes == Writes.READ_FIRST_REPEATABLE_READ && arm.fencesStorage() && arm != Arm.TOKEN_ONLY) {
            return beginWithARead(resource);
        }
        return balance(resource);
    }

    /**
     * The lock-set workload's read: claims the row as {@link #claimAndRead(Arm, Grant)} does for the arms that fence
     * storage (nothing for the controls), then reads its balance and set in one plain statement.
     *
     * @throws StaleFencingTokenException if storage holds a newer token (or the same token of another owner)
     */
    SetState claimAndReadSet(Arm arm, Grant grant) {
        requireTransactionWrites();
        if (arm.fencesStorage()) {
            block(FencedWrite.into(accounts).key("id", grant.resource()).update(pool, requireView(grant.lease())));
        }
        List<List<Object>> rows = query("SELECT balance, elements FROM " + accounts + " WHERE id = '" + grant.resource() + "'");
        if (rows.isEmpty()) {
            throw new IllegalStateException("No account row for " + grant.resource() + " in " + accounts);
        }
        Object elements = rows.get(0).get(1);
        return new SetState(((Number) rows.get(0).get(0)).longValue(), elements == null ? "" : elements.toString());
    }

    /**
     * The lock-set workload's write: the set {@code elements} (the read set with the operation's element added), the
     * increment and the audit row in one transaction; fenced for the arms that fence storage, a plain {@code UPDATE}
     * for the controls.
     *
     * @throws StaleFencingTokenException if storage rejected the token (nothing was committed)
     */
    void writeSet(Arm arm, Grant grant, @Nullable FencedLease view, long newBalance, String elements, String opId) {
        requireTransactionWrites();
        String resource = grant.resource();
        String update = mariaDb ? "UPDATE " + accounts + " SET balance = ?, elements = ? WHERE id = ?"
                : "UPDATE " + accounts + " SET balance = $1, elements = $2 WHERE id = $3";
        block(Mono.usingWhen(pool.create(),
                c -> Mono.from(c.beginTransaction())
                        .then(arm.fencesStorage()
                                ? FencedWrite.into(accounts).key("id", resource).set("balance", newBalance)
                                        .set("elements", elements).update(c, requireView(view))
                                : rowsUpdated(c.createStatement(update).bind(0, newBalance).bind(1, elements).bind(2, resource)))
                        .then(Mono.defer(() -> insertAudit(c, grant, opId)))
                        // Deferred: r2dbc-mariadb decides when commitTransaction() is called whether a transaction is
                        // open, and called at assembly (before BEGIN ran) it sends no COMMIT at all.
                        .then(Mono.defer(() -> Mono.from(c.commitTransaction()))),
                Connection::close,
                (c, error) -> Mono.from(c.rollbackTransaction()).onErrorResume(e -> Mono.empty()).then(Mono.from(c.close())),
                c -> Mono.from(c.rollbackTransaction()).onErrorResume(e -> Mono.empty()).then(Mono.from(c.close()))));
    }

    private void requireTransactionWrites() {
        if (writes != Writes.TRANSACTION || SPRING_TRANSACTIONS) {
            throw new IllegalStateException("The lock-set workload writes in a transaction of its own, not " + writes);
        }
    }

    /** The final set of every resource, by resource: the elements of its row. */
    Map<String, java.util.Set<String>> sets() {
        Map<String, java.util.Set<String>> sets = new LinkedHashMap<>();
        for (List<Object> row : query("SELECT id, elements FROM " + accounts + " ORDER BY id")) {
            Object elements = row.get(1);
            sets.put((String) row.get(0), elements == null ? java.util.Set.of()
                    : java.util.Set.copyOf(java.util.Arrays.stream(elements.toString().split(",")).filter(e -> !e.isEmpty()).toList()));
        }
        return sets;
    }

    /** A row of the lock-set workload as read: its balance and its set, comma-separated. */
    record SetState(long balance, String elements) {

        /** The set with {@code element} added. */
        String with(String element) {
            return elements.isEmpty() ? element : elements + "," + element;
        }
    }

    /**
     * The write transaction of {@link Writes#READ_FIRST_REPEATABLE_READ}, open on the worker's thread from its read
     * to its write. An operation that ends before its write leaves it open; the thread's next read rolls it back.
     */
    private final ThreadLocal<Connection> openTransaction = new ThreadLocal<>();

    private long beginWithARead(String resource) {
        endOpenTransaction(false);
        Connection c = block(Mono.from(pool.create()));
        openTransaction.set(c);
        block(Mono.from(c.beginTransaction(io.r2dbc.spi.IsolationLevel.REPEATABLE_READ)).thenReturn(true));
        return block(Flux.from(c.createStatement("SELECT balance FROM " + accounts + " WHERE id = '" + resource + "'")
                .execute()).flatMap(r -> r.map((row, meta) -> ((Number) row.get(0)).longValue())).next());
    }

    /** Commits (or rolls back) the thread's open transaction, if any, and returns its connection. */
    private void endOpenTransaction(boolean commit) {
        Connection c = openTransaction.get();
        if (c == null) {
            return;
        }
        openTransaction.remove();
        Mono<Void> end = commit ? Mono.from(c.commitTransaction())
                : Mono.from(c.rollbackTransaction()).onErrorResume(e -> Mono.empty());
        end.onErrorResume(e -> Mono.from(c.rollbackTransaction()).onErrorResume(r -> Mono.empty()).then(Mono.error(e)))
                .then(Mono.from(c.close())).block(STATEMENT_TIMEOUT);
    }

    /**
     * Writes {@code newBalance} and the audit row in one transaction, guarded as the arm guards writes.
     *
     * @param view the lease the write carries: the grant's own, or a view that still believes it is held
     * @throws StaleFencingTokenException if storage rejected the token (nothing was committed)
     */
    void write(Arm arm, Grant grant, @Nullable FencedLease view, long newBalance, String opId) {
        String resource = grant.resource();
        boolean fenced = arm.fencesStorage() && arm != Arm.TOKEN_ONLY;
        if (fenced && writes == Writes.SPRING_PROXY) {
            writeThroughTransactionAwareProxy(grant, requireView(view), newBalance, opId);
            return;
        }
        if (fenced && writes == Writes.READ_FIRST_REPEATABLE_READ) {
            writeAfterAReadAtRepeatableRead(grant, requireView(view), newBalance, opId);
            return;
        }
        if (SPRING_TRANSACTIONS && fenced) {
            writeInSpringTransaction(grant, requireView(view), newBalance, opId);
            return;
        }
        block(Mono.usingWhen(pool.create(),
                c -> Mono.from(c.beginTransaction())
                        .then(switch (arm) {
                            case FENCED, FENCED_COUNTER, COUNTER_TOKENS, CLOCK_BEHIND -> FencedWrite.into(accounts).key("id", resource).set("balance", newBalance)
                                    .update(c, requireView(view));
                            case TOKEN_ONLY -> tokenOnly(c, grant, requireView(view),
                                    "balance = $3, fencing_token = $1, fencing_owner = $2", List.of(newBalance));
                            case PLAIN_TTL, UNFENCED_ROW, LEASE_CHECK -> rowsUpdated(c.createStatement("UPDATE " + accounts
                                    + " SET balance = $1 WHERE id = $2").bind(0, newBalance).bind(1, resource));
                        })
                        .then(Mono.defer(() -> insertAudit(c, grant, opId)))
                        // Deferred: r2dbc-mariadb decides when commitTransaction() is called whether a transaction is
                        // open, and called at assembly (before BEGIN ran) it sends no COMMIT at all.
                        .then(Mono.defer(() -> Mono.from(c.commitTransaction()))),
                Connection::close,
                (c, error) -> Mono.from(c.rollbackTransaction()).onErrorResume(e -> Mono.empty()).then(Mono.from(c.close())),
                c -> Mono.from(c.rollbackTransaction()).onErrorResume(e -> Mono.empty()).then(Mono.from(c.close()))));
    }

    /**
     * The same write as a Spring application makes it: the fenced update on the pool (no connection of its own)
     * and the audit insert through a {@code DatabaseClient}, inside {@code TransactionalOperator.transactional}.
     * The fenced write joins the transaction, so a stale token rolls the audit row back too.
     */
    private void writeInSpringTransaction(Grant grant, FencedLease view, long newBalance, String opId) {
        org.springframework.r2dbc.core.DatabaseClient client = org.springframework.r2dbc.core.DatabaseClient.create(pool);
        org.springframework.transaction.reactive.TransactionalOperator transactions =
                org.springframework.transaction.reactive.TransactionalOperator.create(
                        new org.springframework.r2dbc.connection.R2dbcTransactionManager(pool));
        Mono<Long> work = FencedWrite.into(accounts).key("id", grant.resource()).set("balance", newBalance).update(pool, view)
                .then(client.sql("INSERT INTO " + audit + " (resource, token, owner, op_id) VALUES ($1, $2, $3, $4)")
                        .bind(0, grant.resource()).bind(1, grant.token()).bind(2, grant.owner()).bind(3, opId)
                        .fetch().rowsUpdated());
        block(work.as(transactions::transactional));
    }

    /** The audit row of a committed increment, in the write's transaction. */
    private Mono<Long> insertAudit(Connection c, Grant grant, String opId) {
        String values = mariaDb ? "?, ?, ?, ?" : "$1, $2, $3, $4";
        return rowsUpdated(c.createStatement("INSERT INTO " + audit + " (resource, token, owner, op_id) VALUES (" + values + ")")
                .bind(0, grant.resource()).bind(1, grant.token()).bind(2, grant.owner()).bind(3, opId));
    }

    /** The fence table of {@link Writes#SPRING_PROXY}, next to the account table. */
    private dev.fenced.r2dbc.FenceTable fence() {
        return dev.fenced.r2dbc.FenceTable.named(accounts + "_fence");
    }

    /** {@link Writes#SPRING_PROXY}. */
    private void writeThroughTransactionAwareProxy(Grant grant, FencedLease view, long newBalance, String opId) {
        org.springframework.r2dbc.core.DatabaseClient client = org.springframework.r2dbc.core.DatabaseClient.create(pool);
        org.springframework.transaction.reactive.TransactionalOperator transactions =
                org.springframework.transaction.reactive.TransactionalOperator.create(
                        new org.springframework.r2dbc.connection.R2dbcTransactionManager(pool));
        ConnectionFactory proxy = new org.springframework.r2dbc.connection.TransactionAwareConnectionFactoryProxy(pool);
        FencedWrite balance = FencedWrite.into(accounts).key("id", grant.resource()).set("balance", newBalance);
        boolean callerFails = java.util.concurrent.ThreadLocalRandom.current().nextInt(Writes.CALLER_FAILS_ONE_IN) == 0;
        Mono<Long> work = client.sql("SELECT balance FROM " + accounts + " WHERE id = '" + grant.resource() + "'")
                .fetch().all()
                .thenMany(fence().inTransaction(proxy, view, c -> balance.update(c, view)))
                .then(callerFails ? Mono.error(new IllegalStateException("the caller failed after the fenced step"))
                        : Mono.<Void>empty())
                .then(client.inConnection(c -> insertAudit(c, grant, opId)));
        block(work.as(transactions::transactional));
    }

    /** {@link Writes#READ_FIRST_REPEATABLE_READ}: the write in the transaction that read first. */
    private void writeAfterAReadAtRepeatableRead(Grant grant, FencedLease view, long newBalance, String opId) {
        Connection c = openTransaction.get();
        if (c == null) {
            throw new IllegalStateException("No transaction open on " + Thread.currentThread().getName() + " for " + opId);
        }
        boolean written = false;
        try {
            block(FencedWrite.into(accounts).key("id", grant.resource()).set("balance", newBalance).update(c, view)
                    .then(insertAudit(c, grant, opId)));
            written = true;
        } finally {
            endOpenTransaction(written);
        }
    }

    /** Whether fenced writes go through Spring's transaction management ({@code -Dtorture.writes=spring}). */
    private static final boolean SPRING_TRANSACTIONS = "spring".equals(System.getProperty("torture.writes"));

    private static FencedLease requireView(@Nullable FencedLease view) {
        if (view == null) {
            throw new IllegalStateException("This arm writes with a lease, but the grant has none");
        }
        return view;
    }

    /**
     * The control rule "accept iff stored token <= presented token", without the owner check (the
     * library does not offer it, so it is written here). A rejection is reported to the lease, as the
     * library does, so that liveness is comparable.
     */
    private Mono<Long> tokenOnly(Connection c, Grant grant, FencedLease lease, String set, List<Object> extra) {
        var statement = c.createStatement("UPDATE " + accounts + " SET " + set
                + " WHERE id = $" + (3 + extra.size()) + " AND (fencing_token IS NULL OR fencing_token <= $1)");
        statement.bind(0, lease.token()).bind(1, lease.ownerId());
        for (int i = 0; i < extra.size(); i++) {
            statement.bind(2 + i, extra.get(i));
        }
        statement.bind(2 + extra.size(), grant.resource());
        return rowsUpdated(statement).flatMap(rows -> rows > 0 ? Mono.just(rows)
                : Flux.from(c.createStatement("SELECT fencing_token, fencing_owner FROM " + accounts + " WHERE id = $1")
                                .bind(0, grant.resource()).execute())
                        .flatMap(r -> r.map((row, meta) -> {
                            Long token = row.get(0, Long.class);
                            String owner = row.get(1, String.class);
                            return StaleFencingTokenException.of(lease.name(), accounts + " (id = " + grant.resource() + ")",
                                    lease.token(), lease.ownerId(), token == null ? 0 : token, owner);
                        }))
                        .next()
                        .flatMap(rejection -> {
                            lease.reportRejectedWrite(rejection);
                            return Mono.<Long>error(rejection);
                        }));
    }

    private static Mono<Long> rowsUpdated(io.r2dbc.spi.Statement statement) {
        return Flux.from(statement.execute()).flatMap(Result::getRowsUpdated).reduce(0L, Long::sum);
    }

    long balance(String resource) {
        List<List<Object>> rows = query("SELECT balance FROM " + accounts + " WHERE id = '" + resource + "'");
        if (rows.isEmpty()) {
            throw new IllegalStateException("No account row for " + resource + " in " + accounts);
        }
        return ((Number) rows.get(0).get(0)).longValue();
    }

    Map<String, Long> balances() {
        Map<String, Long> balances = new LinkedHashMap<>();
        for (List<Object> row : query("SELECT id, balance FROM " + accounts + " ORDER BY id")) {
            balances.put((String) row.get(0), ((Number) row.get(1)).longValue());
        }
        return balances;
    }

    /** The audit rows in commit order per resource. */
    List<AuditRow> auditRows() {
        List<AuditRow> rows = new ArrayList<>();
        for (List<Object> row : query("SELECT id, resource, token, owner, op_id FROM " + audit + " ORDER BY id")) {
            rows.add(new AuditRow(((Number) row.get(0)).longValue(), (String) row.get(1), ((Number) row.get(2)).longValue(),
                    (String) row.get(3), (String) row.get(4)));
        }
        return rows;
    }

    void drop() {
        if (writes == Writes.SPRING_PROXY) {
            execute("DROP TABLE IF EXISTS " + fence().name());
        }
        execute("DROP TABLE IF EXISTS " + audit);
        execute("DROP TABLE IF EXISTS " + accounts);
    }

    private void execute(String sql) {
        block(Mono.usingWhen(pool.create(), c -> rowsUpdated(c.createStatement(sql)), Connection::close));
    }

    private List<List<Object>> query(String sql) {
        return block(Mono.usingWhen(pool.create(), c -> Flux.from(c.createStatement(sql).execute())
                        .flatMap(result -> result.map((row, meta) -> {
                            List<Object> values = new ArrayList<>();
                            for (int i = 0; i < meta.getColumnMetadatas().size(); i++) {
                                values.add(row.get(i));
                            }
                            return values;
                        }))
                        .collectList(),
                Connection::close));
    }

    private static <T> T block(Mono<T> mono) {
        return mono.block(STATEMENT_TIMEOUT);
    }

    @Override
    public void close() {
        pool.disposeLater().onErrorResume(e -> Mono.empty()).block(Duration.ofSeconds(10));
    }

    /** One committed increment, as the audit table holds it. */
    record AuditRow(long id, String resource, long token, String owner, String opId) {
    }
}
