package dev.fenced.lock;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.R2dbcException;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Result;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.Objects;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * The table in which a PostgreSQL lock client keeps its leases ({@link FencedLockClientBuilder#postgres}): one
 * row per lock, holding its current owner, its token counter and its expiry. Clients that must exclude each
 * other use the same table (and key prefix).
 *
 * <pre>{@code
 * PostgresLeaseTable.defaultTable().create(connectionFactory).block();   // once, or run lease-table.sql yourself
 * FencedLockClient locks = FencedLockClient.builder().postgres(connectionFactory).build();
 * }</pre>
 *
 * <p>The DDL ships as the resource {@code dev/fenced/lock/internal/postgres/lease-table.sql} (table
 * {@value #DEFAULT_NAME}). Its columns are public: {@code lock_id} (the lease's {@link FencedLease#lockId()}),
 * {@code owner} ({@link FencedLease#ownerId()}, {@code NULL} while free), {@code token}, {@code expires_at} and
 * {@code holder} ({@code token label}: the {@linkplain FencedLockClientBuilder#holderLabel(String) holder label}
 * of the latest grant that wrote one, after its token; the fleet view shows it only while the row holds that token). A table created by a version without {@code holder} gets it from {@link #create} (or run
 * {@link #upgradeDdl()} yourself); until then the clients work without labels (one WARN line each).
 * r2dbc-fencing reads them to check a lease in the transaction of a fenced write ({@code FencedWrite.checkLease}):
 * that check locks the row {@code FOR KEY SHARE}, and the store's acquire locks a row {@code FOR UPDATE}, so the
 * lock is granted to no other owner until the write's transaction ends, while renewals and releases (which lock
 * {@code FOR NO KEY UPDATE}) go on. Immutable and thread-safe.
 */
public final class PostgresLeaseTable {

    private static final Logger log = LoggerFactory.getLogger(PostgresLeaseTable.class);

    /** The default table name. */
    public static final String DEFAULT_NAME = "fenced_lease";

    private static final String DDL_RESOURCE = "/dev/fenced/lock/internal/postgres/lease-table.sql";
    private static final Pattern PART = Pattern.compile("[A-Za-z_][A-Za-z0-9_]{0,62}");

    private final String name;

    private PostgresLeaseTable(String name) {
        this.name = name;
    }

    /**
     * The lease table {@value #DEFAULT_NAME}.
     *
     * @return the table
     */
    public static PostgresLeaseTable defaultTable() {
        return new PostgresLeaseTable(DEFAULT_NAME);
    }

    /**
     * A lease table with the given name. Names are quoted in SQL, so they are case-sensitive.
     *
     * @param table letters, digits and underscores, not starting with a digit, at most 63 characters;
     *     optionally schema-qualified ({@code locks.fenced_lease}) with a schema of the same form
     * @return the table
     * @throws IllegalArgumentException if the name is not of that form
     */
    public static PostgresLeaseTable named(String table) {
        Objects.requireNonNull(table, "table must not be null");
        int dot = table.indexOf('.');
        boolean valid = dot < 0 ? PART.matcher(table).matches()
                : PART.matcher(table.substring(0, dot)).matches() && PART.matcher(table.substring(dot + 1)).matches();
        if (!valid) {
            throw new IllegalArgumentException("Not a valid lease table name: '" + table + "' (use letters, digits and "
                    + "underscores, not starting with a digit, at most 63 characters; it may be schema-qualified)");
        }
        return new PostgresLeaseTable(table);
    }

    /**
     * The table name.
     *
     * @return the name as given
     */
    public String name() {
        return name;
    }

    /**
     * The DDL of this table, from the shipped resource.
     *
     * @return the {@code CREATE TABLE IF NOT EXISTS} statement
     */
    public String ddl() {
        try (InputStream in = PostgresLeaseTable.class.getResourceAsStream(DDL_RESOURCE)) {
            if (in == null) {
                throw new IllegalStateException("Missing resource " + DDL_RESOURCE);
            }
            String sql = new String(in.readAllBytes(), StandardCharsets.UTF_8);
            return sql.replace("CREATE TABLE IF NOT EXISTS " + DEFAULT_NAME,
                    "CREATE TABLE IF NOT EXISTS \"" + name.replace(".", "\".\"") + "\"");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * The statement that brings a table created by an earlier version up to this one: it adds the {@code holder}
     * column if it is missing, and does nothing otherwise (idempotent). {@link #create} runs it too.
     *
     * @return the {@code ALTER TABLE … ADD COLUMN IF NOT EXISTS} statement
     */
    public String upgradeDdl() {
        return "ALTER TABLE \"" + name.replace(".", "\".\"") + "\" ADD COLUMN IF NOT EXISTS holder text";
    }

    /**
     * {@link #upgradeDdl()} only if the column is missing: {@code ALTER TABLE} takes the table's strongest lock even
     * when {@code IF NOT EXISTS} makes it a no-op, and would queue every lease statement behind a long transaction.
     */
    private String upgradeIfNeeded() {
        String quoted = "\"" + name.replace(".", "\".\"") + "\"";
        return "DO $fenced$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '" + quoted + "'::regclass"
                + " AND attname = 'holder' AND NOT attisdropped) THEN " + upgradeDdl() + "; END IF; END $fenced$";
    }

    /**
     * Creates the table if it does not exist, and adds what a table created by an earlier version lacks
     * ({@link #upgradeDdl()}), on a connection of its own. Idempotent. Cold: subscribing sends the DDL. A user that
     * may use but does not own a table of an earlier version may not add the column ({@code 42501}, "must be owner"):
     * that logs one WARN line and completes, and the clients work without labels until the table's owner runs
     * {@link #upgradeDdl()}.
     *
     * @param connectionFactory the connection factory of the database
     * @return completion; the driver's error if the DDL fails
     */
    public Mono<Void> create(ConnectionFactory connectionFactory) {
        Objects.requireNonNull(connectionFactory, "connectionFactory must not be null");
        // Reading the resource is blocking I/O: keep it off the caller's (possibly event-loop) thread.
        return Mono.fromCallable(this::ddl)
                .subscribeOn(Schedulers.boundedElastic())
                .flatMap(ddl -> Mono.usingWhen(connectionFactory.create(),
                        c -> Flux.from(c.createStatement(ddl).execute()).flatMap(Result::getRowsUpdated)
                                .thenMany(Flux.from(c.createStatement(upgradeIfNeeded()).execute()).flatMap(Result::getRowsUpdated)
                                        .onErrorResume(PostgresLeaseTable::notOwner, e -> {
                                            log.warn("The lease table {} has no holder column and this user may not add it"
                                                    + " ({}): grants store no holder label until the table's owner runs {}",
                                                    name, e.getMessage(), upgradeDdl());
                                            return Mono.empty();
                                        }))
                                .then(),
                        Connection::close));
    }

    /** Whether the upgrade failed for want of ownership (SQLSTATE 42501, insufficient privilege). */
    private static boolean notOwner(Throwable error) {
        return error instanceof R2dbcException e && "42501".equals(e.getSqlState());
    }

    @Override
    public boolean equals(@Nullable Object other) {
        return other instanceof PostgresLeaseTable that && name.equals(that.name);
    }

    @Override
    public int hashCode() {
        return name.hashCode();
    }

    @Override
    public String toString() {
        return "PostgresLeaseTable{" + name + "}";
    }
}
