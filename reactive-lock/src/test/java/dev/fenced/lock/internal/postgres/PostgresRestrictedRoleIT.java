package dev.fenced.lock.internal.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.PostgresLeaseTable;
import dev.fenced.lock.internal.ClientSettings;
import dev.fenced.lock.internal.LeaseStore.AcquireReply;
import dev.fenced.lock.internal.LeaseStore.Broken;
import dev.fenced.lock.internal.LeaseStore.Handoff;
import dev.fenced.lock.internal.LeaseStore.LockState;
import dev.fenced.lock.internal.LeaseStore.RenewRequest;
import dev.fenced.lock.internal.NamePattern;
import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The PostgreSQL store under a role with exactly the privileges the README lists for it ({@code SELECT},
 * {@code INSERT} and {@code UPDATE} on the lease table, nothing else: not its owner, no {@code DELETE}, nothing on
 * the schema beyond what PostgreSQL gives every role), sharing statements (the default, made to share through a gate) and not: every statement the store
 * sends runs, its lone and shared acquires and releases, the hand-off, renewals, the fleet view, breaking a lock and
 * the release notification ({@code LISTEN}/{@code pg_notify}).
 */
@ExtendWith(PostgresServerExtension.class)
class PostgresRestrictedRoleIT {

    private static final Duration WAIT = Duration.ofSeconds(30);

    private ConnectionPool admin;
    private ConnectionPool app;
    private String table;
    private String role;
    private String prefix;

    @BeforeEach
    void createRoleAndTable(PostgresServer postgres) {
        String suffix = UUID.randomUUID().toString().replace("-", "").substring(0, 8);
        table = "fenced_lease_role_" + suffix;
        role = "fenced_locks_" + suffix;
        prefix = "role-" + suffix + ":";
        admin = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(postgres.r2dbcUrl()))
                .maxSize(2).build());
        PostgresLeaseTable.named(table).create(admin).block(WAIT);
        sql("CREATE ROLE " + role + " LOGIN");
        sql("GRANT SELECT, INSERT, UPDATE ON " + table + " TO " + role);
        app = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(
                postgres.r2dbcUrl().replaceFirst("//[^@/]*@", "//" + role + "@"))).maxSize(16).build());
    }

    @AfterEach
    void dropRoleAndTable() {
        app.disposeLater().block(WAIT);
        sql("DROP TABLE " + table);
        sql("DROP OWNED BY " + role);
        sql("DROP ROLE " + role);
        admin.disposeLater().block(WAIT);
    }

    @ParameterizedTest(name = "shared statements {0}")
    @ValueSource(booleans = {true, false})
    void everyStatementOfTheStoreRunsWithSelectInsertAndUpdateOnTheTable(boolean shared) throws Exception {
        ClientSettings settings = ClientSettings.of(prefix, Duration.ofSeconds(60), null, Duration.ofSeconds(60),
                Duration.ofSeconds(10), null);
        GatedConnections gate = new GatedConnections(app);
        PostgresLeaseStore store = PostgresLeaseStore.open(gate, table, settings, "web-1", shared);
        try {
            assertThat(store.acquire("lone", "me", 60_000, 0).block(WAIT).acquired()).as("a lone acquire").isTrue();
            List<String> names = new ArrayList<>();
            for (int i = 0; i < 12; i++) {
                names.add("n-" + i);
            }
            List<AcquireReply> grants = together(gate, n -> store.acquire(n, "blocked", 60_000, 0), () -> Flux.fromIterable(names)
                    .flatMapSequential(n -> store.acquire(n, "me", 60_000, 0), 64).collectList());
            assertThat(grants).as("acquires in flight at once").allMatch(AcquireReply::acquired);

            List<Boolean> renewed = store.renew(List.of(new RenewRequest("n-0", "me", grants.get(0).token(), 60_000),
                    new RenewRequest("n-1", "me", grants.get(1).token(), 60_000))).block(WAIT);
            assertThat(renewed).as("a renewal").containsExactly(true, true);

            assertThat(store.locks(NamePattern.of("n-*")).collectList().block(WAIT)).as("the fleet view")
                    .hasSize(names.size()).allMatch(s -> "web-1".equals(s.holderLabel()));
            LockState one = store.lock("lone").block(WAIT);
            assertThat(one).as("one lock of the fleet view").isNotNull();

            // Notifications need the driver's own connections (LISTEN): a store on the pool, not through the gate.
            PostgresLeaseStore listening = PostgresLeaseStore.open(app, table, settings, null, shared);
            try {
                CompletableFuture<Long> notified = listening.releases("lone").next().toFuture();
                Thread.sleep(500); // the notification connection has run LISTEN
                assertThat(store.release("lone", "me", null).block(WAIT)).as("a lone release").isTrue();
                assertThat(notified.get(WAIT.toSeconds(), TimeUnit.SECONDS)).as("its notification").isNotNull();
            } finally {
                listening.close().block(WAIT);
            }

            Handoff handoff = store.handOff("n-0", "me", grants.get(0).token(), "next", 60_000, 0).block(WAIT);
            assertThat(handoff.released()).as("a hand-off's release").isTrue();
            assertThat(handoff.next()).as("a hand-off's grant").isNotNull();
            assertThat(handoff.next().acquired()).as("a hand-off's grant").isTrue();

            Broken broken = store.breakLock("n-1").block(WAIT);
            assertThat(broken.held()).as("breaking a held lock").isTrue();

            List<Boolean> released = together(gate, n -> store.release(n, "blocked", null), () -> Flux.fromIterable(names.subList(2, names.size()))
                    .flatMapSequential(n -> store.release(n, "me", null), 64).collectList());
            assertThat(released).as("releases in flight at once").containsOnly(true);
            if (shared) {
                assertThat(java.util.Arrays.stream(store.sharedStatements()).boxed().toList()).as("shared acquire and release statements")
                        .allMatch(n -> n > 0);
            }
            assertThat(store.locks(NamePattern.of("n-*")).map(LockState::name).collectList().block(WAIT))
                    .as("held at the end: the hand-off's grant").containsExactly("n-0");
        } finally {
            store.close().block(WAIT);
            settings.scheduler().dispose();
        }
    }

    /**
     * Runs {@code requests} while every statement slot of their kind waits at the gate ({@code blocked}: a request of
     * that kind), so that, sharing, they queue up and leave together once it opens.
     */
    private static <T> T together(GatedConnections gate, java.util.function.Function<String, Mono<?>> blocked,
            java.util.function.Supplier<Mono<T>> requests) throws Exception {
        try {
            gate.takeEverySlot(blocked, WAIT);
            CompletableFuture<T> result = requests.get().toFuture();
            Thread.sleep(100);
            gate.open();
            return result.get(WAIT.toSeconds(), TimeUnit.SECONDS);
        } finally {
            gate.open();
        }
    }

    private void sql(String statement) {
        Flux.usingWhen(admin.create(), c -> Flux.from(c.createStatement(statement).execute())
                .concatMap(r -> r.getRowsUpdated()), Connection::close).then().block(WAIT);
    }
}
