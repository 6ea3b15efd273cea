package dev.fenced.r2dbc;

import io.r2dbc.spi.Connection;
import java.util.Locale;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * What fenced statements need to know of one database: how identifiers are quoted, how bind markers are
 * written, whether a guarded upsert is one statement, the locking read that explains a refusal, the clock function,
 * and the fence table's DDL. The
 * dialect of a connection is read from its metadata (no I/O), so a spec works on any supported database.
 * Stateless, so thread-safe.
 */
enum SqlDialect {

    /** PostgreSQL: {@code "quoted"} identifiers, {@code $n} markers, {@code INSERT … ON CONFLICT … DO UPDATE … WHERE}. */
    POSTGRESQL('"', "now()", "fence-table.sql", "text", true, " FOR KEY SHARE"),

    /**
     * MariaDB and MySQL: {@code `quoted`} identifiers, {@code ?} markers. Their {@code ON DUPLICATE KEY UPDATE}
     * cannot report whether a guarded update was refused (with the found-rows flag their drivers set, an unchanged
     * row counts as one), so a guarded upsert is a guarded {@code UPDATE}, then an {@code INSERT} when no row
     * exists, then the {@code UPDATE} again if another writer inserted the row in between.
     */
    MARIADB('`', "CURRENT_TIMESTAMP(6)", "fence-table-mariadb.sql", "varchar(512)", false, " FOR UPDATE");

    private final char quote;
    private final String now;
    private final String fenceDdl;
    private final String textKeyType;
    private final boolean atomicUpsert;
    private final String lockingRead;

    SqlDialect(char quote, String now, String fenceDdl, String textKeyType, boolean atomicUpsert, String lockingRead) {
        this.lockingRead = lockingRead;
        this.quote = quote;
        this.now = now;
        this.fenceDdl = fenceDdl;
        this.textKeyType = textKeyType;
        this.atomicUpsert = atomicUpsert;
    }

    /**
     * The dialect of a connection, from its {@code ConnectionMetadata} (a local read, no round trip).
     *
     * @param connection the connection
     * @return the dialect
     * @throws IllegalStateException for a database that fenced writes do not support
     */
    static SqlDialect of(Connection connection) {
        String product = connection.getMetadata().getDatabaseProductName();
        String lower = product.toLowerCase(Locale.ROOT);
        if (lower.contains("postgres")) {
            return POSTGRESQL;
        }
        if (lower.contains("mariadb") || lower.contains("mysql")) {
            return MARIADB;
        }
        throw new IllegalStateException("Fenced writes support PostgreSQL and MariaDB/MySQL; this connection is to "
                + product);
    }

    /**
     * Quotes a checked identifier, quoting each part of a schema-qualified table.
     *
     * @param name a name checked by {@link Identifiers}
     * @return the quoted identifier
     */
    String quote(String name) {
        int dot = name.indexOf('.');
        if (dot >= 0) {
            return quote(name.substring(0, dot)) + "." + quote(name.substring(dot + 1));
        }
        return quote + name + quote;
    }

    /**
     * The bind marker of a value.
     *
     * @param index the value's index among the statement's values, from 0
     * @return {@code $n} (numbered from 1, so a value may be used several times) or {@code ?} (one per use)
     */
    String marker(int index) {
        return this == POSTGRESQL ? "$" + (index + 1) : "?";
    }

    /** Whether a marker names its value, so that one bound value serves every use of it. */
    boolean numberedMarkers() {
        return this == POSTGRESQL;
    }

    /** Whether a guarded upsert is one statement that tells accepted from refused by its row count. */
    boolean atomicUpsert() {
        return atomicUpsert;
    }

    /** The SQL of the current time, for the fence table's {@code updated_at}. */
    String now() {
        return now;
    }

    /** The resource (next to {@link FenceTable}) holding the fence table's DDL. */
    String fenceDdlResource() {
        return fenceDdl;
    }

    /** The column type of text that is a key or compared, such as the fence table's {@code lock_id}. */
    String textKeyType() {
        return textKeyType;
    }

    /**
     * Whether a refusal is explained with a plain read first, the locking read only when the plain one contradicts
     * the refusal. Not on PostgreSQL: its locking read {@code FOR KEY SHARE} does not make the valid holder's
     * {@code UPDATE} wait, so it always explains with that; at {@code REPEATABLE READ} and {@code SERIALIZABLE} both
     * reads may show the snapshot's version of a row changed since (without a serialization failure: the change kept
     * the key), a refused token there possibly older than the stored one (150 while storage holds 200), so the
     * write checks it there with {@code FOR SHARE} in a savepoint rolled back at once. On MariaDB, yes: its locking read {@code FOR UPDATE} would make the valid holder wait for a refused
     * writer's transaction at {@code READ COMMITTED}, and the transaction's own isolation level cannot be learnt
     * cheaply and without privileges ({@code @@tx_isolation} is the session's, not a {@code SET TRANSACTION}
     * level). So under MariaDB's {@code REPEATABLE READ} the token reported, and the floor raised, may be a
     * snapshot's, lower than the stored one; the refusal itself is exact (the guarded statement decided).
     */
    boolean explainsWithPlainReadFirst() {
        return this != POSTGRESQL;
    }

    /**
     * The clause that makes a {@code SELECT} a locking read, which the explanation of a refused write needs when a
     * plain read contradicts the refusal: a plain read under InnoDB's {@code REPEATABLE READ} (MariaDB's default) sees
     * the transaction's snapshot, not the row the guarded statement judged, while a locking read sees the latest
     * committed version and holds its lock until the transaction ends. On PostgreSQL it is the weakest lock that does
     * so, {@code FOR KEY SHARE}, which does not conflict with the {@code FOR NO KEY UPDATE} lock of another
     * transaction's (non-key) {@code UPDATE}, so the valid holder's next write does not wait for a refused writer's
     * transaction. On InnoDB it is {@code FOR UPDATE}, the lock the guarded {@code UPDATE} itself takes on the rows it
     * reads under {@code REPEATABLE READ} (under {@code READ COMMITTED} it releases it for a row that does not match;
     * the locking read then keeps one until the transaction ends, on that rare path only). Under PostgreSQL's
     * {@code REPEATABLE READ} and {@code SERIALIZABLE}, a locking read of a row changed after the snapshot fails to
     * serialize (SQLSTATE {@code 40001}) instead of reading it.
     */
    String lockingRead() {
        return lockingRead;
    }

    /**
     * The isolation level of the connection's transaction when its snapshot may hide a committed row even from the
     * locking read: PostgreSQL at {@code REPEATABLE READ} or {@code SERIALIZABLE}, where no read of the transaction
     * sees a row another transaction inserted after the snapshot. Whether such a row exists cannot be told from
     * inside the transaction (transaction ids are server-wide, so "something committed since" says nothing about
     * this row), so the caller reports the ambiguity. Asked only on the rare path where a guarded statement and its
     * locking read found no row. InnoDB's locking reads see the latest committed rows at every level, so on MariaDB
     * it is always empty, with no round trip.
     *
     * @param connection the connection
     * @return the level as the database names it ({@code repeatable read}, {@code serializable}), or empty
     */
    Mono<String> snapshotIsolation(Connection connection) {
        if (this != POSTGRESQL || connection.isAutoCommit()) {
            return Mono.empty();
        }
        return firstValue(connection, "SELECT current_setting('transaction_isolation')")
                .filter(level -> level.equals("repeatable read") || level.equals("serializable"));
    }

    private static Mono<String> firstValue(Connection connection, String sql) {
        return Flux.from(connection.createStatement(sql).execute())
                .flatMap(result -> result.map(row -> String.valueOf(row.get(0))))
                .next();
    }
}
