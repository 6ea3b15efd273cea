package dev.fenced.torture;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * I6, I7 and the mutex model (M1, M2) on hand-made histories: grant order comes from when acquires were invoked and completed, never from tokens,
 * and commit order from the audit table. Times are given in milliseconds of an arbitrary clock.
 */
class CheckerTest {

    private static final String RESOURCE = "account-1";

    private final History history = new History();
    private final List<Ledger.AuditRow> audit = new ArrayList<>();

    @Test
    void anEarlierGrantCommittedAfterALaterOneIsFlaggedThoughItsTokenIsHigher() {
        // The counter fell back: the later grant has the lower token, so I1 and I3 see nothing.
        History.Op earlier = committed("earlier", 5, 0, 10, 50);
        History.Op later = committed("later", 4, 20, 30, 35);

        Checker.Result result = check(later, earlier);

        assertThat(result.i6()).isEqualTo(1);
        assertThat(result.i1()).isZero();
        assertThat(result.i3()).isZero();
        assertThat(result.examples()).contains("I6 " + RESOURCE + ": earlier (token 5) committed after later (token 4), "
                + "whose acquire was invoked 10 ms after this lease was granted");
    }

    @Test
    void writesCommittedInGrantOrderPass() {
        History.Op earlier = committed("earlier", 5, 0, 10, 15);
        History.Op later = committed("later", 4, 20, 30, 35);

        assertThat(check(earlier, later).i6()).isZero();
    }

    @Test
    void overlappingAcquiresAreNotOrdered() {
        // The second acquire was invoked before the first had completed: neither was granted before the other.
        History.Op first = committed("first", 5, 0, 30, 50);
        History.Op second = committed("second", 4, 20, 40, 45);

        assertThat(check(second, first).i6()).isZero();
    }

    @Test
    void aWriteIsComparedWithEveryEarlierCommitNotOnlyTheLastOne() {
        History.Op stale = committed("stale", 9, 0, 10, 80);
        History.Op newest = committed("newest", 3, 20, 30, 35);
        // Overlaps the stale one's acquire, so it alone would not flag the stale write.
        History.Op overlapping = committed("overlapping", 4, 5, 40, 45);

        assertThat(check(newest, overlapping, stale).i6()).isEqualTo(1);
    }

    @Test
    void writesOfOtherResourcesAreNotCompared() {
        History.Op earlier = committed("earlier", 5, 0, 10, 50);
        History.Op later = committed("later", "account-2", 4, 20, 30, 35);

        assertThat(check(later, earlier).i6()).isZero();
    }

    @Test
    void anAcknowledgedElementMissingFromTheFinalSetIsFlagged() {
        History.Op kept = committed("kept", 4, 0, 10, 15);
        History.Op overwritten = committed("overwritten", 5, 20, 30, 35);

        Checker.Result result = checkSets(Map.of(RESOURCE, java.util.Set.of("kept")), kept, overwritten);

        assertThat(result.i7()).isEqualTo(1);
        assertThat(result.setChecked()).isTrue();
        assertThat(result.examples()).contains("I7 overwritten (token 5) was acknowledged but its element is not in the "
                + "final set of " + RESOURCE + " (1 elements)");
    }

    @Test
    void aRejectedElementInTheFinalSetIsFlagged() {
        History.Op kept = committed("kept", 4, 0, 10, 15);
        History.Op rejected = new History.Op("rejected", "w", RESOURCE, 3, "owner-rejected", History.Outcome.STALE,
                History.Step.WRITE, ms(0), ms(1), ms(40), ms(41), true, true, unfenced(), "", null);
        history.record(rejected);

        Checker.Result result = checkSets(Map.of(RESOURCE, java.util.Set.of("kept", "rejected")), kept);

        assertThat(result.i7()).isEqualTo(1);
    }

    @Test
    void everyAcknowledgedElementInTheFinalSetPasses() {
        History.Op first = committed("first", 4, 0, 10, 15);
        History.Op second = committed("second", 5, 20, 30, 35);

        assertThat(checkSets(Map.of(RESOURCE, java.util.Set.of("first", "second")), first, second).i7()).isZero();
    }

    @Test
    void withoutSetsI7DoesNotApply() {
        Checker.Result result = check(committed("only", 4, 0, 10, 15));

        assertThat(result.setChecked()).isFalse();
        assertThat(result.i7()).isZero();
    }

    @Test
    void aLaterGrantWithALowerTokenBreaksTheTokenOrder() {
        hold("earlier", 5, 0, 10, 40);
        hold("later", 4, 50, 60, 90);

        Checker.Result result = checkMutex(Checker.Mutex.FULL);

        assertThat(result.m1()).isEqualTo(1);
        assertThat(result.m2()).isZero();
        assertThat(result.examples()).contains("M1 " + RESOURCE + ": later got token 4, not above earlier's 5, granted "
                + "40 ms before it was asked for");
    }

    @Test
    void overlappingAcquiresAreNotOrderedByTheTokenOrder() {
        // The second acquire was invoked before the first had completed.
        hold("first", 5, 0, 30, 40);
        hold("second", 4, 20, 50, 90);

        assertThat(checkMutex(Checker.Mutex.FULL).m1()).isZero();
    }

    @Test
    void aHoldGrantedBeforeTheLastOneEndedOverlaps() {
        hold("first", 4, 0, 10, 80);
        hold("second", 5, 20, 60, 100);

        Checker.Result result = checkMutex(Checker.Mutex.FULL);

        assertThat(result.m2()).isEqualTo(1);
        assertThat(result.violations()).isEqualTo(1);
        assertThat(result.examples()).contains("M2 " + RESOURCE + ": second (token 5) was granted 20 ms before the hold of "
                + "first (token 4) ended");
    }

    @Test
    void holdsOneAfterTheOtherDoNotOverlap() {
        hold("first", 4, 0, 10, 50);
        hold("second", 5, 20, 60, 100);

        assertThat(checkMutex(Checker.Mutex.FULL).m2()).isZero();
    }

    @Test
    void overlapsAreReportedButNotViolationsWhereOnlyTheTokenOrderIsExpected() {
        hold("first", 4, 0, 10, 80);
        hold("second", 5, 20, 60, 100);

        Checker.Result result = checkMutex(Checker.Mutex.TOKEN_ORDER_ONLY);

        assertThat(result.m2()).isEqualTo(1);
        assertThat(result.violations()).isZero();
    }

    @Test
    void aHoldNeverReleasedLastsUntilItsLocalDeadline() {
        // Not released and no loss signal (a frozen holder): the hold ends at its deadline, 90 ms.
        holdUntil("first", 4, 0, 10, 90, 0, 0);
        hold("second", 5, 20, 60, 100);

        Checker.Result result = checkMutex(Checker.Mutex.FULL);

        assertThat(result.m2()).isEqualTo(1);
        assertThat(result.examples()).contains("M2 " + RESOURCE + ": second (token 5) was granted 30 ms before the hold of "
                + "first (token 4) ended");
    }

    @Test
    void aHoldEndsAtItsLossSignalBeforeItsDeadline() {
        // Lost at 40 ms, deadline 90 ms, released (failed) at 120 ms: the hold ended with the loss signal.
        holdUntil("first", 4, 0, 10, 90, 40, 120);
        hold("second", 5, 20, 60, 100);

        assertThat(checkMutex(Checker.Mutex.FULL).m2()).isZero();
    }

    @Test
    void aLossSignalAfterTheNextGrantStillOverlaps() {
        holdUntil("first", 4, 0, 10, 90, 70, 0);
        hold("second", 5, 20, 60, 100);

        Checker.Result result = checkMutex(Checker.Mutex.FULL);

        assertThat(result.m2()).isEqualTo(1);
        assertThat(result.examples()).contains("M2 " + RESOURCE + ": second (token 5) was granted 10 ms before the hold of "
                + "first (token 4) ended");
    }

    /**
     * A hold with its local deadline at {@code deadline}, a loss signal at {@code lostAt} and a release at
     * {@code releasedAt} (0: none); recorded as an operation that wrote nothing.
     */
    private void holdUntil(String id, long token, long acquireInvokedAt, long acquiredAt, long deadline, long lostAt,
            long releasedAt) {
        Grant.LeaseRecord lease = new Grant.LeaseRecord(true, ms(deadline), 0, lostAt == 0 ? 0 : ms(lostAt),
                lostAt == 0 ? null : dev.fenced.lock.LossReason.EXPIRED, releasedAt == 0 ? 0 : ms(releasedAt), null);
        long endedAt = releasedAt != 0 ? releasedAt : lostAt != 0 ? lostAt : deadline;
        history.record(new History.Op(id, "w", RESOURCE, token, "owner-" + id, History.Outcome.LOST, History.Step.CLAIM,
                ms(acquireInvokedAt), ms(acquiredAt), 0, ms(endedAt), false, false, lease, "", null));
    }

    /** A hold released at {@code releasedAt}, its deadline later; recorded as an operation that wrote nothing. */
    private void hold(String id, long token, long acquireInvokedAt, long acquiredAt, long releasedAt) {
        Grant.LeaseRecord lease = new Grant.LeaseRecord(true, ms(releasedAt + 500), 0, 0, null, ms(releasedAt), null);
        history.record(new History.Op(id, "w", RESOURCE, token, "owner-" + id, History.Outcome.LOST, History.Step.CLAIM,
                ms(acquireInvokedAt), ms(acquiredAt), 0, ms(releasedAt), false, false, lease, "", null));
    }

    private Checker.Result checkMutex(Checker.Mutex mutex) {
        return Checker.check("test", Arm.FENCED, Duration.ofMillis(600), history, Map.of(), audit, Map.of(), mutex);
    }

    private History.Op committed(String id, long token, long acquireInvokedAt, long acquiredAt, long writtenAt) {
        return committed(id, RESOURCE, token, acquireInvokedAt, acquiredAt, writtenAt);
    }

    private History.Op committed(String id, String resource, long token, long acquireInvokedAt, long acquiredAt,
            long writtenAt) {
        History.Op op = new History.Op(id, "w", resource, token, "owner-" + id, History.Outcome.OK, History.Step.WRITE,
                ms(acquireInvokedAt), ms(acquiredAt), ms(writtenAt), ms(writtenAt + 1), false, false, unfenced(), "", null);
        history.record(op);
        return op;
    }

    private static long ms(long millis) {
        return millis * 1_000_000;
    }

    private static Grant.LeaseRecord unfenced() {
        return new Grant.LeaseRecord(false, 0, 0, 0, null, 0, null);
    }

    /** Checks the history with {@code inCommitOrder} as the audit table. */
    private Checker.Result check(History.Op... inCommitOrder) {
        return checkSets(Map.of(), inCommitOrder);
    }

    /** Checks as {@link #check} does, with {@code sets} as the final sets of the lock-set workload. */
    private Checker.Result checkSets(Map<String, java.util.Set<String>> sets, History.Op... inCommitOrder) {
        Map<String, Long> balances = new java.util.HashMap<>();
        for (History.Op op : inCommitOrder) {
            audit.add(new Ledger.AuditRow(audit.size() + 1, op.resource(), op.token(), op.owner(), op.id()));
            balances.merge(op.resource(), 1L, Long::sum);
        }
        return Checker.check("test", Arm.FENCED, Duration.ofMillis(600), history, balances, audit, sets);
    }
}
