package dev.fenced.torture;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.testservices.MariaDbServer;
import dev.fenced.testservices.MariaDbServerExtension;
import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import dev.fenced.testservices.RedisServer;
import dev.fenced.testservices.RedisServerExtension;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The writes arms of issue 22 ({@code W…}): the workload of {@link TortureIT}'s scenario 1 (stalls, the frozen child
 * JVM), locks on the shared Redis, with the ledger written where fenced writes broke before: on MariaDB at
 * {@code REPEATABLE READ}, each write transaction reading first ({@link Ledger.Writes#READ_FIRST_REPEATABLE_READ}),
 * and in Spring transactions whose fenced write is given a {@code TransactionAwareConnectionFactoryProxy}
 * to {@code FenceTable.inTransaction}, whose caller sometimes fails after it ({@link Ledger.Writes#SPRING_PROXY}). A
 * refusal reported as accepted commits the stale holder's audit row (I1, I3, I6); a half-way commit leaves a balance
 * without its audit row (I2). Both arms are flagged against the r2dbc-fencing of before issue 22. The table goes to {@code target/writes/torture-report.md}.
 */
@ExtendWith({RedisServerExtension.class, PostgresServerExtension.class, MariaDbServerExtension.class})
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class TortureWritesIT {

    private static final Duration LEASE = Duration.ofMillis(600);
    private static final Duration SCENARIO = Duration.ofSeconds(8);
    private static final Duration LOCK_SET_SCENARIO = Duration.ofSeconds(10);
    private static final Worker.Profile PROFILE = new Worker.Profile(LEASE, Duration.ofSeconds(4), 0.15, 30, 0.5);
    private static final Report REPORT = new Report();

    private static RedisServer redis;
    private static String postgresUrl;
    private static String mariaDbUrl;

    @BeforeAll
    static void services(RedisServer redisServer, PostgresServer postgres, MariaDbServer mariaDb) {
        redis = redisServer;
        postgresUrl = postgres.r2dbcUrl();
        mariaDbUrl = mariaDb.r2dbcUrl();
    }

    @AfterAll
    static void report() {
        String table = REPORT.table();
        Path file = REPORT.write(Path.of(System.getProperty("torture.reportDir", "target"), "writes"));
        System.out.println("\nTorture report, writes arms (" + file + "):\n" + table);
    }

    private static Checker.Result stalls(String scenario, LockService locks) throws Exception {
        Run.Outcome outcome = Run.execute(new Run.Setup(scenario, Arm.FENCED, () -> locks, postgresUrl, 5,
                List.of("account-1", "account-2"), List.of("witness"), PROFILE, SCENARIO), Scenarios.stalls(2));
        REPORT.add(outcome);
        Checker.Result result = outcome.result();
        assertThat(outcome.orphans().total()).as("locks of %s held by nobody: %s", scenario,
                outcome.orphans().describe()).isZero();
        assertThat(result.operations()).as("operations of %s", scenario).isPositive();
        assertThat(result.violations()).as("violations in %s: %s", scenario, result.examples()).isZero();
        assertThat(result.staleRejected()).as("stalled writes are rejected in %s", scenario).isPositive();
        return result;
    }

    /**
     * Jepsen's lock-set workload ({@link Worker#operateLockSet}) in {@code arm}, the ledger where {@code locks} keeps it,
     * under the workers' own pauses (renewal frozen, up to about one lease), partitions of half of them from Redis
     * for twice the lease, and a scripted paused writer in every round ({@link Scenarios#lockSetPartitions}), so that the
     * fenced arms always have a stale write to refuse and the controls a lost element to show.
     */
    private static Checker.Result lockSet(String scenario, Arm arm, LockService locks) throws Exception {
        Run.Outcome outcome = Run.execute(new Run.Setup(scenario, arm, () -> locks, postgresUrl, 5,
                List.of("set-1", "set-2"), List.of("witness"), PROFILE.lockSetWorkload(), LOCK_SET_SCENARIO),
                Scenarios.lockSetPartitions(2_500));
        REPORT.add(outcome);
        Checker.Result result = outcome.result();
        assertThat(outcome.orphans().total()).as("locks of %s (%s) held by nobody: %s", scenario, arm.label(),
                outcome.orphans().describe()).isZero();
        assertThat(result.operations()).as("operations of %s (%s)", scenario, arm.label()).isPositive();
        assertThat(result.setChecked()).as("I7 applies to %s", scenario).isTrue();
        if (arm.isControl()) {
            assertThat(result.i7()).as("acknowledged elements lost by the control arm %s", arm.label()).isPositive();
        } else {
            assertThat(result.violations()).as("violations in %s: %s", scenario, result.examples()).isZero();
            assertThat(result.staleRejected()).as("paused writers are rejected in %s", scenario).isPositive();
        }
        return result;
    }

    @Test
    @Order(1)
    void lockSetInAnUnfencedRowLosesAcknowledgedElements() throws Exception {
        lockSet("L1 lock-set, unfenced row", Arm.UNFENCED_ROW, RedisTopology.shared(redis.host(), redis.port()));
    }

    @Test
    @Order(2)
    void lockSetGuardedByALeaseCheckBeforeTheWriteLosesAcknowledgedElements() throws Exception {
        lockSet("L2 lock-set, lease checked before the write", Arm.LEASE_CHECK,
                RedisTopology.shared(redis.host(), redis.port()));
    }

    @Test
    @Order(3)
    void lockSetOnPostgresThroughTheFencedClaimKeepsEveryAcknowledgedElement() throws Exception {
        lockSet("L3 lock-set, PostgreSQL, fenced claim", Arm.FENCED, RedisTopology.shared(redis.host(), redis.port()));
    }

    @Test
    @Order(4)
    void lockSetOnMariaDbThroughTheFencedClaimKeepsEveryAcknowledgedElement() throws Exception {
        lockSet("L4 lock-set, MariaDB, fenced claim", Arm.FENCED, new WritesVia(
                RedisTopology.shared(redis.host(), redis.port()), mariaDbUrl, Ledger.Writes.TRANSACTION));
    }

    @Test
    @Order(10)
    void writesOnMariaDbAtRepeatableReadThatReadFirstLetNoStaleWriteThrough() throws Exception {
        stalls("W1 writes on MariaDB REPEATABLE READ, read first", new WritesVia(
                RedisTopology.shared(redis.host(), redis.port()), mariaDbUrl, Ledger.Writes.READ_FIRST_REPEATABLE_READ));
    }

    @Test
    @Order(20)
    void springTransactionsWhoseFencedWriteGetsATransactionAwareProxyLetNoStaleWriteThrough() throws Exception {
        stalls("W2 Spring transactions, TransactionAwareConnectionFactoryProxy", new WritesVia(
                RedisTopology.shared(redis.host(), redis.port()), null, Ledger.Writes.SPRING_PROXY));
    }
}
