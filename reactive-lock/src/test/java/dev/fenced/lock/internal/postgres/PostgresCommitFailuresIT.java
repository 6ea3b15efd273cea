package dev.fenced.lock.internal.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.LockServiceException;
import dev.fenced.lock.PostgresLeaseTable;
import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.lock.internal.LeaseStore.Handoff;
import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import java.time.Duration;
import java.util.UUID;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A statement of the store whose commit fails reports what the database kept, not what the statement returned. An
 * auto-commit statement commits after the server has sent its rows, so the error of a failed commit (a deferred
 * constraint here; a serialization failure detected at commit under {@code SERIALIZABLE} in the field) arrives after
 * them. The store took the first row and cancelled the rest, so a lone acquire whose commit failed answered granted
 * while the table held no grant (another client could then take the lock), and a release or a broken lock answered
 * done while the lease stayed. The table here has a deferred constraint trigger that refuses, at commit, the changes
 * the test names; sharing statements (the default) and not.
 */
@ExtendWith(PostgresServerExtension.class)
class PostgresCommitFailuresIT {

    private static final Duration WAIT = Duration.ofSeconds(30);

    private ConnectionPool pool;
    private String table;
    private String prefix;

    @BeforeEach
    void createTable(PostgresServer postgres) {
        table = "fenced_lease_commit_" + UUID.randomUUID().toString().replace("-", "").substring(0, 8);
        prefix = "commit-" + UUID.randomUUID() + ":";
        pool = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(postgres.r2dbcUrl()))
                .maxSize(8).build());
        PostgresLeaseTable.named(table).create(pool).block(WAIT);
        // Refused at commit: a grant of a lock named refuse-grant-…, a clearing of the owner of refuse-clear-…, and any
        // grant to the owner refused-next.
        sql("CREATE FUNCTION " + table + "_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                + " IF (NEW.lock_id LIKE '%refuse-grant-%' AND NEW.owner IS NOT NULL)"
                + " OR (NEW.lock_id LIKE '%refuse-clear-%' AND NEW.owner IS NULL) OR NEW.owner = 'refused-next' THEN"
                + " RAISE EXCEPTION 'refused at commit by the test'; END IF; RETURN NULL; END $$");
        sql("CREATE CONSTRAINT TRIGGER " + table + "_refuse AFTER INSERT OR UPDATE ON " + table
                + " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION " + table + "_refuse()");
    }

    @AfterEach
    void dropTable() {
        sql("DROP TABLE " + table);
        sql("DROP FUNCTION " + table + "_refuse()");
        pool.disposeLater().block(WAIT);
    }

    @ParameterizedTest(name = "shared statements {0}")
    @ValueSource(booleans = {true, false})
    void anAcquireWhoseCommitFailsIsNotGranted(boolean shared) {
        withStore(shared, store -> {
            Object outcome = outcome(store.acquire("refuse-grant-1", "me", 60_000, 0));
            assertThat(outcome).as("an acquire whose commit failed").isInstanceOf(LockServiceException.class);
            assertThat(((Throwable) outcome).getMessage()).contains("refused at commit by the test");
            assertThat(ownerOf("refuse-grant-1")).as("the lock's owner in the table").isNull();
        });
    }

    @ParameterizedTest(name = "shared statements {0}")
    @ValueSource(booleans = {true, false})
    void aReleaseWhoseCommitFailsIsNotReleased(boolean shared) {
        withStore(shared, store -> {
            assertThat(store.acquire("refuse-clear-1", "me", 60_000, 0).block(WAIT).acquired()).isTrue();
            Object outcome = outcome(store.release("refuse-clear-1", "me", null));
            assertThat(outcome).as("a release whose commit failed").isInstanceOf(LockServiceException.class);
            assertThat(ownerOf("refuse-clear-1")).as("the lock's owner in the table").isEqualTo("me");
        });
    }

    @ParameterizedTest(name = "shared statements {0}")
    @ValueSource(booleans = {true, false})
    void breakingALockWhoseCommitFailsBreaksNothing(boolean shared) {
        withStore(shared, store -> {
            assertThat(store.acquire("refuse-clear-2", "me", 60_000, 0).block(WAIT).acquired()).isTrue();
            Object outcome = outcome(store.breakLock("refuse-clear-2"));
            assertThat(outcome).as("breaking a lock, its commit failed").isInstanceOf(LockServiceException.class);
            assertThat(ownerOf("refuse-clear-2")).as("the lock's owner in the table").isEqualTo("me");
        });
    }

    /** The next owner of a hand-off whose grant fails at commit is not told it holds the lock. */
    @ParameterizedTest(name = "shared statements {0}")
    @ValueSource(booleans = {true, false})
    void aHandOffWhoseGrantFailsAtCommitGrantsNothing(boolean shared) {
        withStore(shared, store -> {
            long token = store.acquire("handed", "me", 60_000, 0).block(WAIT).token();
            Object outcome = outcome(store.handOff("handed", "me", token, "refused-next", 60_000, 0));
            if (outcome instanceof Handoff handoff) {
                assertThat(handoff.next()).as("the next owner's grant").satisfiesAnyOf(
                        next -> assertThat(next).isNull(), next -> assertThat(next.acquired()).isFalse());
                assertThat(handoff.nextFailure()).as("the next owner's failure").isInstanceOf(LockServiceException.class);
            } else {
                assertThat(outcome).as("a hand-off whose commit failed").isInstanceOf(LockServiceException.class);
            }
            assertThat(ownerOf("handed")).as("the lock's owner in the table").isNotEqualTo("refused-next");
        });
    }

    // --- helpers ---

    private interface StoreTest {
        void run(PostgresLeaseStore store);
    }

    private void withStore(boolean shared, StoreTest test) {
        ClientSettings settings = ClientSettings.of(prefix, Duration.ofSeconds(60), null, Duration.ofSeconds(60),
                Duration.ofSeconds(5), null);
        PostgresLeaseStore store = PostgresLeaseStore.open(pool, table, settings, null, shared);
        try {
            test.run(store);
        } finally {
            store.close().block(WAIT);
            settings.scheduler().dispose();
        }
    }

    private static Object outcome(Mono<?> call) {
        return call.map(Object.class::cast).onErrorResume(e -> Mono.just(e)).defaultIfEmpty("empty").block(WAIT);
    }

    /** The owner of lock {@code name} in the table, or {@code null} (free, or no row). */
    private @Nullable String ownerOf(String name) {
        return Flux.usingWhen(pool.create(), c -> Flux.from(c.createStatement("SELECT owner FROM " + table
                                + " WHERE lock_id = $1 AND owner IS NOT NULL").bind(0, prefix + "{" + name + "}").execute())
                        .concatMap(r -> r.map((row, meta) -> row.get("owner", String.class))),
                Connection::close).next().block(WAIT);
    }

    private void sql(String statement) {
        Flux.usingWhen(pool.create(), c -> Flux.from(c.createStatement(statement).execute())
                .concatMap(r -> r.getRowsUpdated()), Connection::close).then().block(WAIT);
    }
}
