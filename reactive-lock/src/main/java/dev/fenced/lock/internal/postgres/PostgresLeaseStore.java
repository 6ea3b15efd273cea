package dev.fenced.lock.internal.postgres;

import dev.fenced.lock.TokenScheme;
import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.lock.internal.FleetPages;
import dev.fenced.lock.internal.KeyLayout;
import dev.fenced.lock.internal.LeaseStore;
import dev.fenced.lock.internal.NamePattern;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Result;
import io.r2dbc.spi.Statement;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * The lease store on PostgreSQL, over R2DBC: one row per lock in the lease table
 * ({@code lease-table.sql} beside this class), keyed by the lock id. The row's token is the lock's counter:
 * the row is never deleted, a release only clears its owner. Every operation is one auto-commit statement,
 * so the grant and the token it mints commit together, and every expiry is decided by the database's clock
 * ({@code clock_timestamp()}), never by the client's. Release notifications go through {@code NOTIFY} on the
 * table's channel, with the lock id as payload ({@link ReleaseNotifications}); statements run on connections
 * of the application's connection factory ({@link PostgresCommands}). Acquires (and releases) in flight at once
 * share one multi-row statement ({@link StatementBatcher}), row by row the one-lock statement, and a hand-off to a
 * waiter of the same client is one statement ({@link #handOffSql}); a request made while nothing of its kind runs
 * goes alone, in the one-row statement. Shared acquires, shared releases and the hand-off never wait for an
 * existing row: they skip rows locked by others (a write transaction's lease check, a renewal), whose requests then
 * run alone in the one-row statements, outside the batcher's slots, so that a request waiting for a long
 * transaction holds up no other request of the client; at most {@link StatementBatcher#MAX_ALONE} of each kind at
 * once: a skipped acquire beyond them is answered busy with a short time to try again after
 * ({@link #CROWDED_RETRY_MILLIS}), a skipped release waits for one of them. The system property {@link #BATCHING_PROPERTY} set to
 * {@code false} turns the sharing off: every acquire and release is then a statement of its own.
 *
 * <p>Thread-safe.
 */
public final class PostgresLeaseStore implements LeaseStore {

    private static final Logger log = Loggers.getLogger(PostgresLeaseStore.class);

    private final KeyLayout keys;
    private final PostgresCommands commands;
    private final ReleaseNotifications notifications;
    private final String acquireSql;
    private final String acquireSqlWithoutHolder;
    private final String lockSql;
    private final String pageSql;
    private final String breakSql;
    private final @Nullable String holderLabel;
    /** False once an acquire found no {@code holder} column: the table predates it, and grants store no label. */
    private volatile boolean holderColumn = true;
    private final String renewSql;
    private final String releaseSql;
    private final String acquireManySql;
    private final String acquireManySqlWithoutHolder;
    private final String handOffSql;
    private final String handOffSqlWithoutHolder;
    private final String releaseManySql;
    /** The acquires and releases in flight at once, shared out into multi-row statements; {@code null}: one each. */
    private final @Nullable StatementBatcher<AcquireRequest, AcquireReply> acquires;
    private final @Nullable StatementBatcher<ReleaseRequest, Released> releases;

    /**
     * The system property that, set to {@code false}, makes every acquire and release a statement of its own and a
     * hand-off a release and an acquire, as before 2026-12-06. Unset or anything else (the default): acquires and
     * releases in flight at once share statements and a hand-off is one statement (see the class's javadoc). Read
     * when a store opens.
     */
    static final String BATCHING_PROPERTY = "dev.fenced.postgres.batching";
    private final String channel;
    private final long commandTimeoutMillis;

    /** What an acquire's own {@code lock_timeout} adds to the command timeout, in milliseconds. */
    static final int LOCK_TIMEOUT_MARGIN_MILLIS = 250;

    /**
     * The most a skipped acquire answered busy at once (while the most one-row acquires run already) tells its waiter
     * to wait before it tries again, in milliseconds: a quarter of the command timeout if less, but not less than
     * {@link #CROWDED_RETRY_FLOOR_MILLIS}.
     */
    static final long CROWDED_RETRY_MILLIS = 200;

    /** The least a crowded acquire's waiter waits before it tries again, whatever the command timeout. */
    static final long CROWDED_RETRY_FLOOR_MILLIS = 20;

    /** A shared acquire waits at most the command timeout divided by this for a row being inserted. */
    static final int SHARED_LOCK_WAIT_DIVISOR = 4;

    /** What {@link #lateGrantWindow()} adds to the command timeout. */
    private static final java.time.Duration LATE_COMMIT_MARGIN = java.time.Duration.ofSeconds(1);

    private PostgresLeaseStore(ConnectionFactory connectionFactory, String table, ClientSettings settings,
            @Nullable String holderLabel, boolean batching) {
        this.keys = new KeyLayout(settings.keyPrefix());
        this.holderLabel = holderLabel;
        String quoted = quote(table);
        this.channel = table.substring(table.indexOf('.') + 1);
        // Timeouts fire on the loss scheduler: the errors they raise reach application code, never the renewal thread.
        this.commands = new PostgresCommands(connectionFactory, settings.commandTimeout(), settings.lossScheduler(), quoted);
        this.notifications = new ReleaseNotifications(commands, keys, settings.scheduler(), channel);
        this.commandTimeoutMillis = Math.max(1, settings.commandTimeout().toMillis());
        this.acquireSql = acquireSql(quoted, settings.tokenScheme() == TokenScheme.SERVER_TIME, true);
        this.acquireSqlWithoutHolder = acquireSql(quoted, settings.tokenScheme() == TokenScheme.SERVER_TIME, false);
        // to_jsonb(row) ->> 'holder' is NULL when the column is missing: the view works on a table of an earlier version.
        String held = "SELECT lock_id, token, GREATEST(0, ceil(extract(epoch FROM (expires_at - clock_timestamp())) * 1000))::bigint AS ttl,"
                + " to_jsonb(l) ->> 'holder' AS holder FROM " + quoted + " AS l"
                + " WHERE owner IS NOT NULL AND expires_at > clock_timestamp()";
        this.lockSql = held + " AND lock_id = $1";
        // Keyset pages of the table in the order of its primary key, each starting after the last lock id of the previous
        // one: the inner query is an index range read of PAGE_SIZE rows whatever the filters (with them inside, the
        // planner, which cannot estimate LIKE with a parameter, may scan and sort the whole table for every page).
        // Rows that do not match (other prefixes, free or expired locks) still move the position on; they come back
        // without their values.
        this.pageSql = "SELECT p.lock_id, p.token, p.ttl, p.holder, (p.lock_id LIKE $1 ESCAPE '\\' AND p.owner IS NOT NULL"
                + " AND p.expires_at > clock_timestamp()) AS listed FROM (SELECT lock_id, owner, expires_at, token,"
                + " GREATEST(0, ceil(extract(epoch FROM (expires_at - clock_timestamp())) * 1000))::bigint AS ttl,"
                + " to_jsonb(l) ->> 'holder' AS holder FROM " + quoted + " AS l WHERE lock_id > $2 ORDER BY lock_id LIMIT "
                + FleetPages.PAGE_SIZE + ") AS p ORDER BY p.lock_id";
        // A plain update of non-key columns, as a release: the row, and with it the token counter, stays.
        this.breakSql = "WITH broken AS (UPDATE " + quoted + " AS l SET owner = NULL, expires_at = clock_timestamp()"
                + " WHERE lock_id = $1 AND owner IS NOT NULL AND expires_at > clock_timestamp()"
                + " AND ($3::bigint = 0 OR l.token = $3::bigint)"
                + " RETURNING l.lock_id, l.token, to_jsonb(l) ->> 'holder' AS holder)"
                + " SELECT broken.token, broken.holder FROM broken, pg_notify($2, broken.lock_id)";
        // Renewals lock their rows first, in lock-id order (lockedInOrder): two renewals, or a renewal and another
        // statement that locks in that order, never wait for each other in a cycle. Only the rows the update will change:
        // an expired row may be another owner's next grant, and is not waited for. NO KEY UPDATE, as the update itself
        // takes: a write transaction's lease check (FOR KEY SHARE) is not waited for.
        this.renewSql = "WITH r AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])"
                + " WITH ORDINALITY AS r(lock_id, owner, token, ms, i)), " + lockedInOrder(quoted, "k.token = r.token", false)
                + " UPDATE " + quoted + " AS l SET expires_at = clock_timestamp() + r.ms * interval '1 millisecond' FROM r"
                + " WHERE l.lock_id = r.lock_id AND l.lock_id IN (SELECT lock_id FROM locked) AND l.owner = r.owner"
                + " AND l.token = r.token AND l.expires_at > clock_timestamp() RETURNING r.i";
        this.releaseSql = "WITH released AS (UPDATE " + quoted + " SET owner = NULL, expires_at = clock_timestamp()"
                + " WHERE lock_id = $1 AND owner = $2 AND ($3::bigint IS NULL OR token = $3::bigint)"
                + " AND expires_at > clock_timestamp() RETURNING lock_id)"
                + " SELECT released.lock_id FROM released, pg_notify($4, released.lock_id)";
        boolean serverTime = settings.tokenScheme() == TokenScheme.SERVER_TIME;
        this.acquireManySql = acquireManySql(quoted, serverTime, true);
        this.acquireManySqlWithoutHolder = acquireManySql(quoted, serverTime, false);
        this.handOffSql = handOffSql(quoted, serverTime, true);
        this.handOffSqlWithoutHolder = handOffSql(quoted, serverTime, false);
        this.releaseManySql = releaseManySql(quoted);
        // An acquire skipped while the most one-row acquires run already answers busy, with a short time to try again
        // after (CROWDED_RETRY_MILLIS at most): its row is locked by someone else, often the holder's write transaction
        // (its lease check), but the lease may be released already, its notification gone: a waiter must not sleep as
        // after a busy answer of unknown time.
        long crowdedRetry = Math.min(CROWDED_RETRY_MILLIS, Math.max(CROWDED_RETRY_FLOOR_MILLIS, commandTimeoutMillis / 4));
        this.acquires = batching ? new StatementBatcher<>(r -> acquireAlone(r.name(), r.owner(), r.leaseMillis(), r.floor()),
                this::acquireMany, AcquireRequest::lockId, PostgresErrors::rolledBackByWait, reply -> reply == SKIPPED,
                (e, r) -> commands.classify(e, r.name(), "acquire"), r -> AcquireReply.busy(crowdedRetry), settings.commandTimeout())
                : null;
        this.releases = batching ? new StatementBatcher<>(r -> releaseAlone(r.name(), r.owner(), r.token())
                        .map(released -> released ? Released.RELEASED : Released.NOT_HELD),
                this::releaseMany, ReleaseRequest::lockId, PostgresErrors::rolledBackByWait, reply -> reply == Released.SKIPPED,
                (e, r) -> commands.classify(e, r.name(), "release"), null, settings.commandTimeout()) : null;
    }

    /**
     * The reply of {@link #acquireMany} for a lock whose row someone else had locked: the statement skipped it, and
     * the request runs again alone (compared by identity; never handed to a caller).
     */
    private static final AcquireReply SKIPPED = AcquireReply.busy(-3);

    /** An acquire waiting for its statement. */
    private record AcquireRequest(String lockId, String name, String owner, long leaseMillis, long floor) {
    }

    /** A release waiting for its statement. */
    private record ReleaseRequest(String lockId, String name, String owner, @Nullable Long token) {
    }

    /** The reply of a shared release: its lease released, not held, or its row locked by someone else. */
    private enum Released {
        RELEASED, NOT_HELD, SKIPPED
    }

    /**
     * One statement grants a free or expired lock (minting the next token above the counter, the floor and,
     * with server-time tokens, the database's time in microseconds), refreshes the owner's own live lease
     * (keeping its token), or else reports the holder's remaining time. Two acquires racing for a new lock
     * meet on the primary key: the loser waits for the winner's row and then sees it held. Its snapshot may
     * predate that row, so its reply can hold no row at all: busy, time unknown.
     *
     * <p>{@code SET lock_id = EXCLUDED.lock_id} changes no value; naming the key column makes {@code ON CONFLICT}
     * lock the existing row {@code FOR UPDATE} instead of {@code FOR NO KEY UPDATE} (PostgreSQL picks the mode
     * from the columns the {@code SET} names). {@code FOR UPDATE} is the one mode that waits for a
     * {@code FOR KEY SHARE} lock, which r2dbc-fencing's lease check holds until the fenced write commits: so no
     * acquire can grant the lock to another owner meanwhile, while renewals and releases, plain updates of
     * non-key columns, never wait for it. The grant then also counts as a key update, so a check under
     * {@code REPEATABLE READ} whose snapshot predates it fails to serialize instead of passing on the old row
     * (r2dbc-fencing's {@code LeaseCheckIT} shows all three).
     *
     * <p>The statement bounds itself, by the database's clock, so that an acquire whose client gave up (a
     * timeout, a reset that the backend, waiting on a row lock, does not notice) cannot grant the lock later:
     * <ul>
     *   <li>the grant's {@code WHERE} also requires {@code clock_timestamp()} to be less than the command
     *       timeout ({@code $5} ms) after {@code statement_timestamp()}, when the database received the
     *       statement. {@code ON CONFLICT … WHERE} is evaluated once the row is locked, after any wait for it,
     *       so a statement that waited longer than that updates nothing. This is the bound, whatever the wait;</li>
     *   <li>{@code set_config('lock_timeout', …, true)}, evaluated with {@code now} before the row is inserted
     *       or locked, makes every lock wait of this one-statement transaction end with SQLSTATE 55P03 a little
     *       after the command timeout ({@value #LOCK_TIMEOUT_MARGIN_MILLIS} ms more: the client's own timer fires
     *       first and cancels, and this ends the wait should the cancel not arrive), a wait for another
     *       acquire's insert of a new row included, so the backend does not linger behind a long transaction.
     *       {@code statement_timeout} would not do: it is read when the statement starts, and a
     *       {@code SET LOCAL} before it would cost a round trip and a transaction block. The setting ends with
     *       the statement's transaction.</li>
     * </ul>
     * A commit follows the grant at once, so the grant takes effect within about one command timeout after the
     * database received the statement; the client keeps undoing a failed acquire for that long
     * ({@link #lateGrantWindow()}).
     *
     * <p>Package-private: {@code PostgresStoreFaultsIT} runs it with a command timeout of its own. This form has
     * no {@code holder} column (five parameters); the store runs {@link #acquireSql(String, boolean, boolean)}
     * with it unless the table lacks the column.
     */
    static String acquireSql(String table, boolean serverTime) {
        return acquireSql(table, serverTime, false);
    }

    /**
     * The acquire statement, with or without the {@code holder} column ({@code $6}, the label or {@code NULL}: a
     * grant by a client without a label clears the previous holder's). The column holds {@code token label}: the
     * view shows the label only while the row holds that token, so a grant that wrote none (a client on a table
     * without the column then, or of an earlier version) never shows the previous holder's label.
     */
    static String acquireSql(String table, boolean serverTime, boolean withHolder) {
        return "WITH " + NOW + ", granted AS (" + grant(table, "SELECT $1, $2, %s, now.t + $3 * interval '1 millisecond'%s FROM now",
                        "$4", serverTime, withHolder, FREE + " OR l.owner = EXCLUDED.owner", "l.token")
                + ") SELECT true AS acquired, token, 0::bigint AS ttl FROM granted"
                + " UNION ALL SELECT false, 0::bigint, " + HOLDER_TTL
                + " FROM " + table + " h, now WHERE h.lock_id = $1 AND NOT EXISTS (SELECT 1 FROM granted)";
    }

    /**
     * The acquire statement of several locks: {@link #acquireSql(String, boolean, boolean)} row by row, over arrays
     * of lock ids ({@code $1}), owners ({@code $2}), lease times ({@code $3}) and floors ({@code $4}), each lock at
     * most once; {@code $5} and {@code $6} as there. Each row keeps the one-row statement's token rule, bound and
     * holder label. It never waits for a row lock, and it holds none while it waits for anything, in three steps:
     * <ol>
     *   <li>{@code inserted}: the locks that had no row in the statement's snapshot are inserted, in lock-id order,
     *       {@code ON CONFLICT DO NOTHING}. That waits for nobody's row lock, only for a transaction that inserts (or
     *       changes) the same lock's row at that moment, and the statement holds nothing else yet but its own
     *       inserts of lower lock ids: shared acquires, which all insert in that order, never wait for each other
     *       in a cycle. Its {@code lock_timeout} is a quarter of the command timeout ({@link #SHARED_NOW}): a
     *       transaction that keeps such a row uncommitted longer ends the statement (55P03, nothing changed), and
     *       each lock runs again alone instead of every lock failing at the command timeout. A lock whose insert did
     *       nothing (someone else's row appeared meanwhile) answers {@code skipped};</li>
     *   <li>{@code locked}: only then (its one-time filter reads {@code inserted} to the end) the rows that existed
     *       are locked {@code FOR UPDATE SKIP LOCKED}, in lock-id order; a row locked by someone else (a write
     *       transaction's lease check, a renewal, another statement) is skipped and its lock answers
     *       {@code skipped};</li>
     *   <li>{@code taken}: the rows it locked take the one-row statement's {@code ON CONFLICT DO UPDATE … WHERE},
     *       which cannot wait: this statement holds them.</li>
     * </ol>
     * The two inserts never touch one row: a locked row existed, an inserted one did not. A skipped lock is asked for
     * again alone, in the one-row statement, which may wait for it. So one such row neither holds up the other locks
     * nor closes a cycle: with a write transaction that checks several leases, or with a renewal that holds a lock
     * this statement had no row of and waits for one of its rows (before, the grant of that lock waited for the
     * renewal's row lock while this statement held its other rows: PostgreSQL broke the cycle after
     * {@code deadlock_timeout}). Answers, for each lock by its ordinal {@code i}, a grant, the holder's remaining
     * time or skipped.
     */
    static String acquireManySql(String table, boolean serverTime, boolean withHolder) {
        String source = "SELECT r.lock_id, r.owner, %s, now.t + r.ms * interval '1 millisecond'%s FROM r, now WHERE ";
        String inserted = grant(table, source + "r.lock_id NOT IN (SELECT lock_id FROM existing) ORDER BY r.lock_id",
                "r.floor", serverTime, withHolder, null, "l.lock_id, l.token");
        String taken = grant(table, source + "r.lock_id IN (SELECT lock_id FROM locked) ORDER BY r.lock_id",
                "r.floor", serverTime, withHolder, FREE + " OR l.owner = EXCLUDED.owner", "l.lock_id, l.token");
        return "WITH " + SHARED_NOW + ", r AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])"
                + " WITH ORDINALITY AS r(lock_id, owner, ms, floor, i)),"
                + " existing AS (SELECT e.lock_id FROM " + table + " e WHERE e.lock_id IN (SELECT lock_id FROM r)),"
                + " inserted AS (" + inserted + "),"
                + " locked AS (SELECT k.lock_id FROM " + table + " k WHERE k.lock_id IN (SELECT lock_id FROM r)"
                + " AND (SELECT count(*) FROM inserted) >= 0 ORDER BY k.lock_id FOR UPDATE SKIP LOCKED),"
                + " taken AS (" + taken + ")"
                + " SELECT r.i, true AS acquired, false AS skipped, g.token, 0::bigint AS ttl FROM r"
                + " JOIN (SELECT lock_id, token FROM taken UNION ALL SELECT lock_id, token FROM inserted) g ON g.lock_id = r.lock_id"
                + " UNION ALL SELECT r.i, false, NOT EXISTS (SELECT 1 FROM locked k WHERE k.lock_id = r.lock_id), 0::bigint, "
                + HOLDER_TTL + " FROM r JOIN " + table + " h ON h.lock_id = r.lock_id, now"
                + " WHERE NOT EXISTS (SELECT 1 FROM taken g WHERE g.lock_id = r.lock_id)"
                + " UNION ALL SELECT r.i, false, true, 0::bigint, 0::bigint FROM r"
                + " WHERE r.lock_id NOT IN (SELECT lock_id FROM existing) AND NOT EXISTS (SELECT 1 FROM inserted g WHERE g.lock_id = r.lock_id)";
    }

    /**
     * The release statement of several leases: {@code releaseSql} row by row, over arrays of lock ids ({@code $1}),
     * owners ({@code $2}) and tokens ({@code $3}; 0, never minted, matches any token of the owner), notifying on
     * {@code $4}. It never waits for a row lock: it locks the rows of the leases it releases, and only those,
     * {@code FOR NO KEY UPDATE SKIP LOCKED}, in lock-id order, then clears their owners. A lease held in the
     * statement's snapshot that it did not lock (its row locked by someone else: a renewal, another statement, a
     * transaction's {@code FOR UPDATE}) answers {@code skipped}, and is released again alone, in the one-row statement,
     * which may wait. Only a lease it did not lock reads its row a second time to tell the two apart (for every lease,
     * that read cost about 15 % of the throughput at 64 releases in flight). Answers, for each lease by its ordinal
     * {@code i}, released or skipped; a lease it does not answer was not held.
     */
    static String releaseManySql(String table) {
        String tokenRule = "(r.token = 0 OR k.token = r.token)";
        return "WITH r AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS r(lock_id, owner, token, i)), "
                + lockedInOrder(table, tokenRule, true) + ","
                + " released AS (UPDATE " + table + " AS l SET owner = NULL, expires_at = clock_timestamp() FROM r"
                + " WHERE l.lock_id = r.lock_id AND l.lock_id IN (SELECT lock_id FROM locked) AND l.owner = r.owner"
                + " AND (r.token = 0 OR l.token = r.token)"
                + " AND l.expires_at > clock_timestamp() RETURNING r.i, l.lock_id)"
                + " SELECT released.i, false AS skipped FROM released, pg_notify($4, released.lock_id)"
                + " UNION ALL SELECT r.i, true FROM r WHERE r.lock_id NOT IN (SELECT lock_id FROM locked)"
                + " AND EXISTS (SELECT 1 FROM " + table + " k WHERE k.lock_id = r.lock_id" + liveLease(tokenRule) + ")";
    }

    /**
     * The CTE {@code locked} of a statement over the requests {@code r} that updates the rows of its owners' live
     * leases (a renewal, a shared release): it locks those rows, and only those, {@code FOR NO KEY UPDATE} in lock-id
     * order before the update changes any, so two such statements never wait for each other in a cycle. A renewal
     * waits for a row locked by someone else; a shared release skips it ({@code SKIP LOCKED}) and waits for none.
     *
     * @param table the quoted lease table
     * @param tokenRule how a row's token {@code k.token} must match the request's {@code r.token}
     * @param skipLocked whether a row locked by someone else is skipped instead of waited for
     * @return {@code locked AS MATERIALIZED (…)}
     */
    private static String lockedInOrder(String table, String tokenRule, boolean skipLocked) {
        return "locked AS MATERIALIZED (SELECT k.lock_id FROM " + table + " k JOIN r ON k.lock_id = r.lock_id"
                + liveLease(tokenRule) + " ORDER BY k.lock_id FOR NO KEY UPDATE OF k" + (skipLocked ? " SKIP LOCKED" : "") + ")";
    }

    /**
     * The condition that row {@code k} holds request {@code r}'s live lease: the request's owner, a token matching by
     * {@code tokenRule}, not expired.
     *
     * @param tokenRule how a row's token {@code k.token} must match the request's {@code r.token}
     * @return the condition, starting with {@code AND}
     */
    private static String liveLease(String tokenRule) {
        return " AND k.owner = r.owner AND " + tokenRule + " AND k.expires_at > clock_timestamp()";
    }

    /**
     * The hand-off statement: the acquire of {@link #acquireSql(String, boolean, boolean)} for the next owner
     * ({@code $2}), which takes the lock over only while the releasing lease ({@code $6} owner, {@code $7} token)
     * holds it. It never waits for a row lock: it first locks the lock's row {@code FOR UPDATE SKIP LOCKED}, and
     * takes it over only if it got that lock; a row locked by someone else (a lease check's {@code FOR KEY SHARE},
     * the releasing lease's own write transaction's included, or another statement on the row), or no row at all,
     * makes it change and answer nothing, and the caller falls back to a release, which does not wait for a lease
     * check, and an acquire. Once the row is locked the grant cannot wait; it mints the next token by the
     * acquire's rule, and the lock is never free in between, so nobody is notified. Answers the new token and
     * whether the row was inserted (never, as written: the row must exist and be locked); no row when the
     * releasing lease did not hold the lock or the row was locked. The label, with the holder column, is
     * {@code $8}.
     */
    static String handOffSql(String table, boolean serverTime, boolean withHolder) {
        return "WITH " + NOW + ", locked AS (SELECT lock_id FROM " + table + " WHERE lock_id = $1 FOR UPDATE SKIP LOCKED) "
                + grant(table, "SELECT $1, $2, %s, now.t + $3 * interval '1 millisecond'%s FROM now, locked",
                "$4", serverTime, withHolder ? "$8" : null,
                "l.owner = $6 AND l.token = $7::bigint AND l.expires_at > clock_timestamp()", "l.token, (l.xmax = 0) AS inserted");
    }

    /** The statement's clock and its own lock wait bound (the command timeout, {@code $5} ms, and a margin). */
    private static final String NOW = "now AS (SELECT clock_timestamp() AS t, set_config('lock_timeout', ($5::bigint + "
            + LOCK_TIMEOUT_MARGIN_MILLIS + ")::text, true) AS lt)";

    /**
     * The shared acquire's clock and its own lock wait bound: a quarter of the command timeout ({@code $5} ms). The one
     * wait it may have, for a transaction inserting one of its new locks, ends the statement (55P03) long before the
     * client's timer would fail every member: they run again, each alone (see {@link StatementBatcher}), and only
     * the lock that waited waits again, in a statement of its own.
     */
    private static final String SHARED_NOW = "now AS (SELECT clock_timestamp() AS t, set_config('lock_timeout', ($5::bigint / "
            + SHARED_LOCK_WAIT_DIVISOR + " + 1)::text, true) AS lt)";

    /** A row {@code l} that nobody holds. */
    private static final String FREE = "(l.owner IS NULL OR l.expires_at <= clock_timestamp())";

    /** The remaining time of the holder {@code h}, by the statement's clock. */
    private static final String HOLDER_TTL = "GREATEST(1, ceil(extract(epoch FROM (h.expires_at - now.t)) * 1000))::bigint";

    /**
     * The grant: an insert of the rows of {@code source} (a {@code SELECT} with a {@code %s} for the first token and
     * one for the holder value) that, on a lock's existing row, takes it over where {@code takeOver} holds, minting
     * the next token above the counter and the floor ({@code floor}), keeping it for the owner's own live lease.
     * With {@code takeOver} {@code null} it inserts only, {@code ON CONFLICT DO NOTHING}: an existing row is neither
     * locked nor waited for (only a transaction inserting it at that moment is).
     */
    private static String grant(String table, String source, String floor, boolean serverTime, boolean withHolder,
            @Nullable String takeOver, String returning) {
        return grant(table, source, floor, serverTime, withHolder ? "$6" : null, takeOver, returning);
    }

    /** {@link #grant(String, String, String, boolean, boolean, String, String)} with the label's parameter, if any. */
    private static String grant(String table, String source, String floor, boolean serverTime, @Nullable String label,
            @Nullable String takeOver, String returning) {
        boolean withHolder = label != null;
        String firstToken = serverTime ? "GREATEST(" + floor + " + 1, (extract(epoch FROM now.t) * 1000000)::bigint)" : floor + " + 1";
        String nextToken = "CASE WHEN l.owner = EXCLUDED.owner AND l.expires_at > clock_timestamp() THEN l.token"
                + " ELSE GREATEST(l.token + 1, EXCLUDED.token) END";
        String holderColumn = withHolder ? ", holder" : "";
        String holderValue = withHolder ? ", (" + firstToken + ")::text || ' ' || " + label + "::text" : "";
        String holderSet = withHolder ? " holder = (" + nextToken + ")::text || ' ' || " + label + "::text," : "";
        String insert = "INSERT INTO " + table + " AS l (lock_id, owner, token, expires_at" + holderColumn + ") "
                + String.format(source, firstToken, holderValue);
        if (takeOver == null) {
            return insert + " ON CONFLICT (lock_id) DO NOTHING RETURNING " + returning;
        }
        return insert
                + " ON CONFLICT (lock_id) DO UPDATE SET lock_id = EXCLUDED.lock_id, owner = EXCLUDED.owner,"
                + " expires_at = EXCLUDED.expires_at," + holderSet
                + " token = " + nextToken
                + " WHERE (" + takeOver + ")"
                + " AND clock_timestamp() < statement_timestamp() + $5::bigint * interval '1 millisecond'"
                + " RETURNING " + returning;
    }

    /**
     * A store on the lease table {@code table}, which must exist (see {@code PostgresLeaseTable.create}).
     *
     * @param connectionFactory the application's connection factory of r2dbc-postgresql, normally a pool: every
     *     statement takes a connection of it for its duration, and the release notifications hold one
     * @param table the lease table's name, already validated (optionally schema-qualified)
     * @param settings the client settings
     * @return the store
     */
    public static PostgresLeaseStore open(ConnectionFactory connectionFactory, String table, ClientSettings settings) {
        return open(connectionFactory, table, settings, null);
    }

    /**
     * A store as {@link #open(ConnectionFactory, String, ClientSettings)}, whose grants store a holder label in the
     * {@code holder} column. On a table created by an earlier version, without that column, the first acquire
     * notices (SQLSTATE 42703, nothing changed), logs one WARN line and the store goes on without labels.
     *
     * @param connectionFactory the application's connection factory of r2dbc-postgresql
     * @param table the lease table's name, already validated
     * @param settings the client settings
     * @param holderLabel the label, already validated, or {@code null} for none
     * @return the store
     */
    public static PostgresLeaseStore open(ConnectionFactory connectionFactory, String table, ClientSettings settings,
            @Nullable String holderLabel) {
        return new PostgresLeaseStore(connectionFactory, table, settings, holderLabel,
                !"false".equalsIgnoreCase(System.getProperty(BATCHING_PROPERTY)));
    }

    /**
     * A store as {@link #open(ConnectionFactory, String, ClientSettings, String)}, sharing statements or not.
     *
     * @param connectionFactory the application's connection factory of r2dbc-postgresql
     * @param table the lease table's name, already validated
     * @param settings the client settings
     * @param holderLabel the label, already validated, or {@code null} for none
     * @param batching whether acquires and releases in flight at once share statements
     * @return the store
     */
    static PostgresLeaseStore open(ConnectionFactory connectionFactory, String table, ClientSettings settings,
            @Nullable String holderLabel, boolean batching) {
        return new PostgresLeaseStore(connectionFactory, table, settings, holderLabel, batching);
    }

    /**
     * Quotes a validated table name, part by part.
     *
     * @param table the name, optionally schema-qualified
     * @return the quoted name
     */
    static String quote(String table) {
        return "\"" + table.replace(".", "\".\"") + "\"";
    }

    @Override
    public Mono<AcquireReply> acquire(String name, String owner, long leaseMillis, long floor) {
        StatementBatcher<AcquireRequest, AcquireReply> batcher = acquires;
        return batcher == null ? acquireAlone(name, owner, leaseMillis, floor)
                : batcher.send(new AcquireRequest(keys.lockKey(name), name, owner, leaseMillis, floor));
    }

    /** How many statements of several acquires, and of several releases, this store has run: for tests. */
    int[] sharedStatements() {
        StatementBatcher<?, ?> a = acquires;
        StatementBatcher<?, ?> r = releases;
        return new int[] {a == null ? 0 : a.multiRowStatements(), r == null ? 0 : r.multiRowStatements()};
    }

    /** An acquire in a statement of its own. */
    private Mono<AcquireReply> acquireAlone(String name, String owner, long leaseMillis, long floor) {
        return withHolderColumn(withHolder -> acquire(name, owner, leaseMillis, floor, withHolder));
    }

    /**
     * Runs a statement with the holder column, or again without it if the table has none: a table created by an
     * earlier version (SQLSTATE 42703, nothing changed); one WARN line, and the store goes on without labels.
     */
    private <X> Mono<X> withHolderColumn(java.util.function.Function<Boolean, Mono<X>> statement) {
        boolean withHolder = holderColumn;
        return statement.apply(withHolder)
                .onErrorResume(e -> withHolder && PostgresErrors.missingHolderColumn(e), e -> {
                    if (holderColumn) {
                        holderColumn = false;
                        log.warn("The lease table has no holder column (it was created by an earlier version of Fenced): "
                                + "grants store no holder label, and the fleet view shows none. Run "
                                + "PostgresLeaseTable.create (or its upgradeDdl()) to add it");
                    }
                    return statement.apply(false);
                });
    }

    /**
     * Acquires in one statement ({@link #acquireManySql}), each lock once; a failure unclassified. A lock the
     * statement answers nothing for lost the race for its new row, as in the one-row statement: busy, time unknown.
     */
    private Mono<List<AcquireReply>> acquireMany(List<AcquireRequest> requests) {
        int n = requests.size();
        String[] lockIds = new String[n];
        String[] owners = new String[n];
        Long[] millis = new Long[n];
        Long[] floors = new Long[n];
        for (int i = 0; i < n; i++) {
            AcquireRequest r = requests.get(i);
            lockIds[i] = r.lockId();
            owners[i] = r.owner();
            millis[i] = r.leaseMillis();
            floors[i] = r.floor();
        }
        return withHolderColumn(withHolder -> commands.runMany(true, c -> rows(holder(c.createStatement(
                                withHolder ? acquireManySql : acquireManySqlWithoutHolder)
                        .bind(0, lockIds).bind(1, owners).bind(2, millis).bind(3, floors).bind(4, commandTimeoutMillis), withHolder),
                r -> r.map((row, meta) -> {
                    int i = (int) (longOf(row.get("i", Long.class)) - 1);
                    AcquireReply reply = Boolean.TRUE.equals(row.get("acquired", Boolean.class))
                            ? AcquireReply.acquired(longOf(row.get("token", Long.class)))
                            : Boolean.TRUE.equals(row.get("skipped", Boolean.class)) ? SKIPPED
                            : AcquireReply.busy(longOf(row.get("ttl", Long.class)));
                    return java.util.Map.entry(i, reply);
                }))
                .collectList()
                .map(answered -> {
                    List<AcquireReply> replies = new ArrayList<>(Collections.nCopies(n, AcquireReply.busy(-1)));
                    answered.forEach(e -> replies.set(e.getKey(), e.getValue()));
                    return replies;
                })));
    }

    private Mono<AcquireReply> acquire(String name, String owner, long leaseMillis, long floor, boolean withHolder) {
        String lockId = keys.lockKey(name);
        return commands.runAcquire(name, c -> firstRow(holder(c.createStatement(withHolder ? acquireSql : acquireSqlWithoutHolder)
                        .bind(0, lockId).bind(1, owner).bind(2, leaseMillis).bind(3, floor).bind(4, commandTimeoutMillis),
                        withHolder),
                        r -> r.map((row, meta) -> Boolean.TRUE.equals(row.get("acquired", Boolean.class))
                                ? AcquireReply.acquired(longOf(row.get("token", Long.class)))
                                : AcquireReply.busy(longOf(row.get("ttl", Long.class)))))
                        // Lost the race for a new lock to an acquire that our statement's snapshot does not show.
                        .defaultIfEmpty(AcquireReply.busy(-1)))
                // The row changed under the statement each time it ran (40001 at REPEATABLE READ or SERIALIZABLE,
                // a hand-over in progress), or stayed locked past its lock_timeout (a lease check's transaction):
                // it took nothing and the lock is busy. A waiting acquire waits on.
                .onErrorResume(PostgresErrors::busy, e -> Mono.just(AcquireReply.busy(-1)));
    }

    /**
     * The command timeout, plus a second for the commit that follows a grant and for the clocks' rates: the
     * statement cannot grant later than one command timeout after the database received it, and the database
     * received it before the client saw it fail (a request that a reset connection had not delivered is lost
     * with it).
     */
    @Override
    public java.time.Duration lateGrantWindow() {
        return commands.commandTimeout().plus(LATE_COMMIT_MARGIN);
    }

    @Override
    public Mono<List<Boolean>> renew(List<RenewRequest> leases) {
        if (leases.isEmpty()) {
            return Mono.just(List.of());
        }
        String what = leases.size() == 1 ? leases.get(0).name() : "";
        int n = leases.size();
        String[] lockIds = new String[n];
        String[] owners = new String[n];
        Long[] tokens = new Long[n];
        Long[] millis = new Long[n];
        for (int i = 0; i < n; i++) {
            RenewRequest r = leases.get(i);
            lockIds[i] = keys.lockKey(r.name());
            owners[i] = r.owner();
            tokens[i] = r.token();
            millis[i] = r.leaseMillis();
        }
        return commands.run(what, "renew " + n + " lease(s)", c -> rows(c.createStatement(renewSql)
                        .bind(0, lockIds).bind(1, owners).bind(2, tokens).bind(3, millis),
                        r -> r.map((row, meta) -> longOf(row.get("i", Long.class))))
                .collectList()
                .map(renewed -> {
                    List<Boolean> held = new ArrayList<>(Collections.nCopies(n, Boolean.FALSE));
                    renewed.forEach(ordinal -> held.set((int) (ordinal - 1), Boolean.TRUE));
                    return held;
                }));
    }

    @Override
    public Mono<Boolean> release(String name, String owner, @Nullable Long token) {
        StatementBatcher<ReleaseRequest, Released> batcher = releases;
        return batcher == null ? releaseAlone(name, owner, token)
                : batcher.send(new ReleaseRequest(keys.lockKey(name), name, owner, token)).map(r -> r == Released.RELEASED);
    }

    /** A release in a statement of its own. */
    private Mono<Boolean> releaseAlone(String name, String owner, @Nullable Long token) {
        String lockId = keys.lockKey(name);
        return commands.run(name, "release", c -> {
            Statement statement = c.createStatement(releaseSql).bind(0, lockId).bind(1, owner).bind(3, channel);
            statement = token == null ? statement.bindNull(2, Long.class) : statement.bind(2, token);
            return firstRow(statement, r -> r.map((row, meta) -> Boolean.TRUE)).hasElement();
        });
    }

    /** Releases in one statement ({@link #releaseManySql}), each lock once; a failure unclassified. */
    private Mono<List<Released>> releaseMany(List<ReleaseRequest> requests) {
        int n = requests.size();
        String[] lockIds = new String[n];
        String[] owners = new String[n];
        Long[] tokens = new Long[n];
        for (int i = 0; i < n; i++) {
            ReleaseRequest r = requests.get(i);
            lockIds[i] = r.lockId();
            owners[i] = r.owner();
            Long token = r.token();
            tokens[i] = token == null ? 0L : token;
        }
        return commands.runMany(false, c -> rows(c.createStatement(releaseManySql)
                        .bind(0, lockIds).bind(1, owners).bind(2, tokens).bind(3, channel),
                r -> r.map((row, meta) -> java.util.Map.entry((int) (longOf(row.get("i", Long.class)) - 1),
                        Boolean.TRUE.equals(row.get("skipped", Boolean.class)) ? Released.SKIPPED : Released.RELEASED)))
                .collectList()
                .map(answered -> {
                    List<Released> replies = new ArrayList<>(Collections.nCopies(n, Released.NOT_HELD));
                    answered.forEach(e -> replies.set(e.getKey(), e.getValue()));
                    return replies;
                }));
    }

    /**
     * With {@link #BATCHING_PROPERTY} set to {@code false}, the two steps of {@link LeaseStore#handOff}: a release,
     * then an acquire. By default one statement ({@link #handOffSql}) takes the lock over from the releasing lease
     * for the next owner: no release, no notification, no second statement. Where that statement cannot tell (the
     * releasing lease no longer held the lock, the row was locked by someone else, such as the lease's own write
     * transaction's lease check: the statement never waits for it, or it was rolled back, or outlasted its bound),
     * the default two steps follow: a release, which says whether the lease held the lock, then an acquire. Its
     * failures are classified as a release's.
     */
    @Override
    public Mono<Handoff> handOff(String name, String owner, long token, String nextOwner, long leaseMillis, long floor) {
        Mono<Handoff> twoSteps = Mono.defer(() -> LeaseStore.super.handOff(name, owner, token, nextOwner, leaseMillis, floor));
        if (acquires == null) {
            return twoSteps;
        }
        String lockId = keys.lockKey(name);
        // A grant (its failure signalled once the statement has stopped), but what the caller asked for is a release.
        return withHolderColumn(withHolder -> commands.runMany(true, c -> {
                    Statement statement = c.createStatement(withHolder ? handOffSql : handOffSqlWithoutHolder)
                            .bind(0, lockId).bind(1, nextOwner).bind(2, leaseMillis).bind(3, floor).bind(4, commandTimeoutMillis)
                            .bind(5, owner).bind(6, token);
                    if (withHolder) {
                        String label = holderLabel;
                        statement = label == null ? statement.bindNull(7, String.class) : statement.bind(7, label);
                    }
                    return firstRow(statement, r -> r.map((row, meta) -> new Handoff(!Boolean.TRUE.equals(row.get("inserted", Boolean.class)),
                            AcquireReply.acquired(longOf(row.get("token", Long.class))), null)));
                }).onErrorMap(e -> commands.classify(e, name, "release")))
                .switchIfEmpty(twoSteps)
                .onErrorResume(PostgresErrors::rolledBackByWait, e -> twoSteps);
    }

    /** Binds the label ({@code $6}) of an acquire with the holder column. */
    private Statement holder(Statement statement, boolean withHolder) {
        if (!withHolder) {
            return statement;
        }
        String label = holderLabel;
        return label == null ? statement.bindNull(5, String.class) : statement.bind(5, label);
    }

    /**
     * Keyset pages of the lease table in the order of its primary key: {@link FleetPages#PAGE_SIZE} rows after the
     * last lock id of the previous page (an index range read), of which those whose lock id is {@code LIKE} the
     * escaped prefix and pattern and that are held are listed; remaining times by the database's clock. A listing
     * reads the whole table once, in pages (a {@code LIKE} prefix cannot bound an index range under a collation
     * other than {@code C}).
     */
    @Override
    public Flux<LockState> locks(NamePattern pattern) {
        String like = pattern.like(keys.prefix());
        return FleetPages.stream("", after -> commands.run("", "list locks", c -> rows(c.createStatement(pageSql)
                        .bind(0, like).bind(1, after), r -> r.map((row, meta) -> Boolean.TRUE.equals(row.get("listed", Boolean.class))
                                ? new Object[] {row.get("lock_id", String.class), row.get("token", Long.class),
                                        row.get("ttl", Long.class), row.get("holder", String.class)}
                                : new Object[] {row.get("lock_id", String.class)}))
                .collectList()
                .map(rows -> {
                    List<LockState> held = new ArrayList<>(rows.size());
                    for (Object[] row : rows) {
                        String name = row.length == 1 ? null : pattern.nameIn(keys.prefix(), String.valueOf(row[0]));
                        if (name != null) {
                            long token = longOf((Long) row[1]);
                            held.add(new LockState(name, token, longOf((Long) row[2]), labelOf(token, (String) row[3])));
                        }
                    }
                    String last = rows.isEmpty() ? null : String.valueOf(rows.get(rows.size() - 1)[0]);
                    return new FleetPages.Page<>(held, rows.size() < FleetPages.PAGE_SIZE ? null : last);
                })));
    }

    @Override
    public Mono<LockState> lock(String name) {
        return commands.run(name, "inspect lock", c -> firstRow(c.createStatement(lockSql).bind(0, keys.lockKey(name)),
                r -> r.map((row, meta) -> {
                    long token = longOf(row.get("token", Long.class));
                    return new LockState(name, token, longOf(row.get("ttl", Long.class)),
                            labelOf(token, row.get("holder", String.class)));
                })));
    }

    /**
     * The label of the holder column ({@code token label}) if it was written for {@code token}: the grant of the
     * row's holder. {@code null} for another token's label, or none.
     */
    static @Nullable String labelOf(long token, @Nullable String holder) {
        String prefix = token + " ";
        return holder != null && holder.startsWith(prefix) ? holder.substring(prefix.length()) : null;
    }

    /**
     * One statement: clears the owner of a held row, whoever it is (or only while
     * it holds the expected token), and notifies waiters. The row's token, the
     * lock's counter, stays, so the next grant's token ({@code GREATEST(token + 1, …)}) is above the broken one; the
     * broken holder's renewals and release require its owner and find none.
     */
    @Override
    public Mono<Broken> breakLock(String name, long expectedToken) {
        return commands.run(name, "force-release", c -> firstRow(c.createStatement(breakSql)
                        .bind(0, keys.lockKey(name)).bind(1, channel).bind(2, expectedToken),
                        r -> r.map((row, meta) -> {
                            long token = longOf(row.get("token", Long.class));
                            return new Broken(true, token, labelOf(token, row.get("holder", String.class)));
                        }))
                .defaultIfEmpty(Broken.NOTHING));
    }

    @Override
    public Flux<Long> releases(String name) {
        return notifications.releases(name);
    }

    /**
     * Never emits. A restart of PostgreSQL keeps every lease and counter (they are committed rows), so it
     * loses no lease and needs no signal. A failover to an asynchronous standby can lose the newest commits
     * (a grant, a renewal, counter increments) and is not detected here: that window is closed by the
     * storage check (server-time tokens stay above the lost ones; an equal token of another owner is
     * refused by the fence rule), as the README's "Locks on PostgreSQL" states.
     */
    @Override
    public Flux<String> serverChanges() {
        return Flux.never();
    }

    @Override
    public boolean neverSent(Throwable error) {
        return PostgresErrors.neverSent(error);
    }

    @Override
    public boolean onIoThread() {
        // r2dbc-postgresql runs on Reactor Netty's event loops.
        return Thread.currentThread() instanceof io.netty.util.concurrent.FastThreadLocalThread;
    }

    @Override
    public Mono<Void> ping() {
        return commands.run("", "ping", c -> rows(c.createStatement("SELECT 1"), r -> r.map((row, meta) -> 1)).then());
    }

    /**
     * Refuses later statements and stops listening, on subscription: the client releases its leases first.
     */
    @Override
    public Mono<Void> close() {
        return Mono.defer(() -> {
            commands.close();
            return notifications.close();
        });
    }

    private static <T> Flux<T> rows(Statement statement, java.util.function.Function<Result, org.reactivestreams.Publisher<T>> map) {
        return Flux.from(statement.execute()).concatMap(map);
    }

    /**
     * The first row of a statement, its result read to the end. An auto-commit statement commits after the server has
     * sent its rows, so an error of the commit (a deferred constraint, a serialization failure detected at commit
     * under {@code SERIALIZABLE}) comes after them: taking the first row and cancelling the rest would drop that error
     * and report as granted or released what the database rolled back.
     */
    private static <T> Mono<T> firstRow(Statement statement, java.util.function.Function<Result, org.reactivestreams.Publisher<T>> map) {
        return rows(statement, map).reduce((first, later) -> first);
    }

    private static long longOf(@Nullable Long value) {
        return value == null ? 0 : value;
    }
}
