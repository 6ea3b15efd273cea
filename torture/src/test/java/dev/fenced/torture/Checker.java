package dev.fenced.torture;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * Checks one run's history and the final database against the invariants of issue #5:
 * <ul>
 *   <li><b>I1</b> per resource, the tokens of committed writes never decrease in commit order (audit id), and
 *       each token value has one owner;</li>
 *   <li><b>I2</b> the final balance equals the number of committed increments (audit rows) and lies between
 *       the acknowledged increments and those plus the unknown outcomes; every acknowledged write is in the
 *       audit table and no rejected or abandoned one is;</li>
 *   <li><b>I3</b> by real time: no write is accepted that was sent after a write with a higher token (or the
 *       same token of another owner) had been acknowledged;</li>
 *   <li><b>I4</b> after every fault heals, some acquire succeeds within lease time + {@link #BACKOFF} (unless
 *       the next fault struck before any did: in the soak, faults overlap); per
 *       worker, resource and fault epoch, storage rejects a claim made under a valid lease at most once (one
 *       floor catch-up ends the rejections); no lock is left behind by a cancelled acquire;</li>
 *   <li><b>I5</b> every lost lease's signal fires no later than its local deadline (or the end of the holder's
 *       freeze) plus {@link #LOSS_SIGNAL_BOUND}; a lease whose deadline passed before release was signalled;</li>
 *   <li><b>I6</b> per resource, once a write of a lease has been committed, no write of a lease granted before it
 *       is committed later (commit order from the audit table; grant order from the history, by real time, see
 *       {@link History.Op#grantedBefore}, never from tokens). Stronger than I3: it also catches a stale holder
 *       whose token is higher than the newer holder's, as when Redis's counter fell back by several grants.</li>
 *   <li><b>M1</b>, <b>M2</b> (the fenced-mutex model check, where a run asks for it): per resource, a lease granted
 *       before another in real time has the lower token; no two acknowledged holds overlap.</li>
 *   <li><b>I7</b> (the lock-set workload only) every element whose write was acknowledged is in the final set of its
 *       resource, and no element of a rejected or abandoned operation is.</li>
 * </ul>
 * Pure: no I/O. Thread-safe (stateless).
 */
final class Checker {

    /** The allowance for reconnect back-off and waiter timers in I4. */
    static final Duration BACKOFF = Duration.ofSeconds(3);

    /** The "small bound" of I5: losses fire within a few ms; this leaves room for a starved 2-core CI machine. */
    static final Duration LOSS_SIGNAL_BOUND = Duration.ofMillis(750);

    private static final int MAX_EXAMPLES = 5;

    private Checker() {
    }

    static Result check(String scenario, Arm arm, Duration leaseTime, History history, Map<String, Long> balances,
            List<Ledger.AuditRow> audit) {
        return check(scenario, arm, leaseTime, history, balances, audit, Map.of());
    }

    /**
     * Checks as {@link #check(String, Arm, Duration, History, Map, List)} does, and I7 on {@code sets}, the final set
     * of each resource of the lock-set workload (empty: the run had none, I7 does not apply).
     */
    static Result check(String scenario, Arm arm, Duration leaseTime, History history, Map<String, Long> balances,
            List<Ledger.AuditRow> audit, Map<String, Set<String>> sets) {
        return check(scenario, arm, leaseTime, history, balances, audit, sets, Mutex.NONE);
    }

    /** Checks as {@link #check(String, Arm, Duration, History, Map, List, Map)} does, and the mutex model {@code mutex}. */
    static Result check(String scenario, Arm arm, Duration leaseTime, History history, Map<String, Long> balances,
            List<Ledger.AuditRow> audit, Map<String, Set<String>> sets, Mutex mutex) {
        List<History.Op> ops = history.ops();
        List<String> examples = new ArrayList<>();
        int i1 = checkI1(audit, examples);
        int i2 = checkI2(ops, balances, audit, examples);
        int i3 = checkI3(ops, audit, examples);
        int i4 = checkI4(leaseTime, history, ops, examples);
        List<Long> latencies = new ArrayList<>();
        int i5 = arm == Arm.PLAIN_TTL ? 0 : checkI5(ops, latencies, examples);
        int i6 = checkI6(ops, audit, examples);
        int i7 = sets.isEmpty() ? 0 : checkI7(ops, sets, examples);
        int m1 = mutex == Mutex.NONE ? 0 : checkM1(ops, examples);
        int m2 = mutex == Mutex.NONE ? 0 : checkM2(ops, examples);
        Collections.sort(latencies);
        int ok = count(ops, History.Outcome.OK);
        int stale = count(ops, History.Outcome.STALE);
        int lost = count(ops, History.Outcome.LOST);
        int unknown = count(ops, History.Outcome.UNKNOWN);
        int lossSignals = (int) ops.stream().filter(op -> op.lease().lostAt() != 0).count();
        return new Result(scenario, arm, ops.size(), ok, stale, lost, unknown, history.acquireFailures(), lossSignals,
                i1, i2, i3, i4, i5, i6, i7, !sets.isEmpty(), m1, m2, mutex, percentile(latencies, 50),
                percentile(latencies, 99),
                arm == Arm.PLAIN_TTL,
                List.copyOf(examples.subList(0, Math.min(examples.size(), MAX_EXAMPLES * 5))));
    }

    private static int checkI1(List<Ledger.AuditRow> audit, List<String> examples) {
        int violations = 0;
        Map<String, Long> last = new HashMap<>();
        Map<String, String> ownerOfToken = new HashMap<>();
        for (Ledger.AuditRow row : audit) {
            Long previous = last.put(row.resource(), row.token());
            if (previous != null && row.token() < previous) {
                violations++;
                example(examples, "I1", row.resource() + ": token " + row.token() + " (" + row.opId()
                        + ") committed after token " + previous);
            }
            String owner = ownerOfToken.putIfAbsent(row.resource() + "#" + row.token(), row.owner());
            if (owner != null && !owner.equals(row.owner())) {
                violations++;
                example(examples, "I1", row.resource() + ": token " + row.token() + " committed by two owners ("
                        + row.opId() + ")");
            }
        }
        return violations;
    }

    private static int checkI2(List<History.Op> ops, Map<String, Long> balances, List<Ledger.AuditRow> audit,
            List<String> examples) {
        int violations = 0;
        Set<String> committed = new HashSet<>();
        Map<String, Integer> rows = new HashMap<>();
        for (Ledger.AuditRow row : audit) {
            committed.add(row.opId());
            rows.merge(row.resource(), 1, Integer::sum);
        }
        for (Map.Entry<String, Long> account : balances.entrySet()) {
            String resource = account.getKey();
            long balance = account.getValue();
            long ok = ops.stream().filter(op -> op.resource().equals(resource) && op.outcome() == History.Outcome.OK).count();
            long unknown = ops.stream().filter(op -> op.resource().equals(resource) && op.outcome() == History.Outcome.UNKNOWN).count();
            int increments = rows.getOrDefault(resource, 0);
            if (balance != increments || balance < ok || balance > ok + unknown) {
                violations++;
                example(examples, "I2", resource + ": balance " + balance + ", " + increments + " committed increments, "
                        + ok + " acknowledged, " + unknown + " unknown (lost updates: " + Math.max(0, increments - balance) + ")");
            }
        }
        for (History.Op op : ops) {
            boolean inAudit = committed.contains(op.id());
            if (op.outcome() == History.Outcome.OK && !inAudit) {
                violations++;
                example(examples, "I2", op.id() + " was acknowledged but is not in the audit table");
            } else if ((op.outcome() == History.Outcome.STALE || op.outcome() == History.Outcome.LOST) && inAudit) {
                violations++;
                example(examples, "I2", op.id() + " was reported " + op.outcome() + " but committed");
            }
        }
        return violations;
    }

    private static int checkI3(List<History.Op> ops, List<Ledger.AuditRow> audit, List<String> examples) {
        Set<String> committed = new HashSet<>();
        for (Ledger.AuditRow row : audit) {
            committed.add(row.opId());
        }
        Map<String, List<History.Op>> byResource = new TreeMap<>();
        for (History.Op op : ops) {
            if (committed.contains(op.id())) {
                byResource.computeIfAbsent(op.resource(), r -> new ArrayList<>()).add(op);
            }
        }
        int violations = 0;
        for (List<History.Op> writes : byResource.values()) {
            for (History.Op later : writes) {
                for (History.Op acked : writes) {
                    if (acked.outcome() != History.Outcome.OK || later == acked
                            || later.writeInvokedAt() - acked.completedAt() <= 0) {
                        continue;
                    }
                    boolean older = later.token() < acked.token()
                            || (later.token() == acked.token() && !later.owner().equals(acked.owner()));
                    if (older) {
                        violations++;
                        example(examples, "I3", later.id() + " (token " + later.token() + ") was accepted after "
                                + acked.id() + " (token " + acked.token() + ") had been acknowledged");
                        break;
                    }
                }
            }
        }
        return violations;
    }

    private static int checkI4(Duration leaseTime, History history, List<History.Op> ops, List<String> examples) {
        int violations = 0;
        long bound = leaseTime.plus(BACKOFF).toNanos();
        List<History.Fault> faults = history.faults();
        for (History.Fault fault : faults) {
            Long first = history.firstAcquireAfter(fault.healedAt());
            long nextFault = faults.stream().mapToLong(History.Fault::injectedAt)
                    .filter(at -> at - fault.injectedAt() > 0).min().orElse(Long.MAX_VALUE);
            boolean interrupted = nextFault != Long.MAX_VALUE && nextFault - fault.healedAt() < bound
                    && (first == null || first - nextFault > 0);
            if (interrupted) {
                // The next fault struck before the system had its time to recover: no verdict on this one.
                continue;
            }
            if (first == null || first - fault.healedAt() > bound) {
                violations++;
                example(examples, "I4", "no acquire within " + Duration.ofNanos(bound).toMillis() + " ms after "
                        + fault.kind() + " healed" + (first == null ? "" : " (took " + (first - fault.healedAt()) / 1_000_000 + " ms)"));
            }
        }
        Map<String, History.Op> firstRejection = new HashMap<>();
        Map<String, Integer> claimRejections = new HashMap<>();
        Map<String, History.Op> byOwner = new HashMap<>();
        for (History.Op op : ops) {
            byOwner.put(op.owner(), op);
        }
        for (History.Op op : ops) {
            if (op.outcome() == History.Outcome.STALE && op.step() == History.Step.CLAIM) {
                int epoch = 0;
                for (History.Fault fault : faults) {
                    if (op.acquiredAt() - fault.injectedAt() >= 0) {
                        epoch++;
                    }
                }
                String key = op.worker() + "|" + op.resource() + "|" + epoch;
                History.Op first = firstRejection.putIfAbsent(key, op);
                History.Op rejecter = op.rejectedByOwner() == null ? null : byOwner.get(op.rejectedByOwner());
                if (first != null && rejecter != null && rejecter.acquiredAt() - first.completedAt() < 0) {
                    // Rejected by a lease granted before the first rejection taught the floor (one granted before
                    // the fault, still in flight with a higher token): no catch-up could have known of it. After
                    // the floor, the counter cannot hand out a token above this holder's while it holds the lock.
                    continue;
                }
                if (claimRejections.merge(key, 1, Integer::sum) > 1 && first != null) {
                    violations++;
                    example(examples, "I4", op.id() + ": a second claim rejection on " + op.resource()
                            + " in fault epoch " + epoch + " (the floor catch-up did not end them); first " + first.id()
                            + " [" + first.detail() + "], then [" + op.detail() + "], "
                            + (op.acquiredAt() - first.acquiredAt()) / 1_000_000 + " ms apart");
                }
            }
        }
        for (String orphan : history.orphans()) {
            violations++;
            example(examples, "I4", "lock left behind: " + orphan);
        }
        return violations;
    }

    private static int checkI5(List<History.Op> ops, List<Long> latencies, List<String> examples) {
        int violations = 0;
        long bound = LOSS_SIGNAL_BOUND.toNanos();
        long worst = Long.MIN_VALUE;
        String worstOp = "";
        for (History.Op op : ops) {
            Grant.LeaseRecord lease = op.lease();
            if (!lease.fenced()) {
                continue;
            }
            long deadline = lease.effectiveDeadline();
            if (lease.lostAt() != 0) {
                long latency = lease.lostAt() - deadline;
                latencies.add(latency);
                if (latency > worst) {
                    worst = latency;
                    worstOp = op.id() + " (" + lease.lossReason() + (lease.thawedAt() != 0 ? ", frozen" : "") + ", "
                            + op.outcome() + " at " + op.step() + ")" + timeline(lease);
                }
                if (latency > bound) {
                    violations++;
                    example(examples, "I5", op.id() + ": loss (" + lease.lossReason() + ") signalled "
                            + latency / 1_000_000 + " ms after the deadline" + timeline(lease));
                }
            } else if (lease.releasedAt() != 0 && lease.releasedAt() - deadline > bound) {
                violations++;
                example(examples, "I5", op.id() + ": released " + (lease.releasedAt() - deadline) / 1_000_000
                        + " ms after its deadline with no loss signal (outcome " + lease.releaseOutcome() + ")");
            }
        }
        if (!worstOp.isEmpty()) {
            examples.add("slowest loss signal: " + worstOp + " " + worst / 1_000_000 + " ms after the deadline");
        }
        return violations;
    }

    /** Where the holder's thaw and release fell, relative to the local deadline: what I5's measure started from. */
    private static String timeline(Grant.LeaseRecord lease) {
        StringBuilder s = new StringBuilder(" (local deadline ");
        long deadline = lease.deadline();
        s.append(lease.thawedAt() == 0 ? "never frozen" : "thawed at " + signedMillis(lease.thawedAt() - deadline));
        if (lease.releasedAt() != 0) {
            s.append(", release called at ").append(signedMillis(lease.releasedAt() - deadline)).append(" (")
                    .append(lease.releaseOutcome()).append(')');
        }
        s.append(", loss at ").append(signedMillis(lease.lostAt() - deadline)).append(')');
        return s.toString();
    }

    private static String signedMillis(long nanos) {
        long millis = nanos / 1_000_000;
        return (millis >= 0 ? "+" : "") + millis + " ms";
    }

    private static int checkI6(List<History.Op> ops, List<Ledger.AuditRow> audit, List<String> examples) {
        Map<String, History.Op> byId = new HashMap<>();
        for (History.Op op : ops) {
            byId.put(op.id(), op);
        }
        // Per resource, the committed write whose acquire was invoked last so far: a later commit whose lease was
        // granted before that acquire was invoked is a write of an earlier-granted lease after a later one's.
        Map<String, History.Op> latestInvoked = new HashMap<>();
        int violations = 0;
        for (Ledger.AuditRow row : audit) {
            History.Op op = byId.get(row.opId());
            if (op == null) {
                continue; // committed without a recorded operation: I2 counts it
            }
            History.Op latest = latestInvoked.get(row.resource());
            if (latest != null && op.grantedBefore(latest)) {
                violations++;
                example(examples, "I6", row.resource() + ": " + op.id() + " (token " + op.token() + ") committed after "
                        + latest.id() + " (token " + latest.token() + "), whose acquire was invoked "
                        + (latest.acquireInvokedAt() - op.acquiredAt()) / 1_000_000 + " ms after this lease was granted");
            }
            if (latest == null || op.acquireInvokedAt() - latest.acquireInvokedAt() > 0) {
                latestInvoked.put(row.resource(), op);
            }
        }
        return violations;
    }

    /**
     * I7, Jepsen's lock-set check: every element whose write was acknowledged is in the final set of its resource (an
     * element of an unknown outcome may be in it or not; one of a rejected or abandoned operation must not be).
     */
    private static int checkI7(List<History.Op> ops, Map<String, Set<String>> sets, List<String> examples) {
        int violations = 0;
        for (History.Op op : ops) {
            Set<String> set = sets.get(op.resource());
            if (set == null) {
                continue; // not a resource of the lock-set workload (a witness's)
            }
            boolean present = set.contains(op.id());
            if (op.outcome() == History.Outcome.OK && !present) {
                violations++;
                example(examples, "I7", op.id() + " (token " + op.token() + ") was acknowledged but its element is not in "
                        + "the final set of " + op.resource() + " (" + set.size() + " elements)");
            } else if ((op.outcome() == History.Outcome.STALE || op.outcome() == History.Outcome.LOST) && present) {
                violations++;
                example(examples, "I7", op.id() + " was reported " + op.outcome() + " but its element is in the final set of "
                        + op.resource());
            }
        }
        return violations;
    }

    /**
     * M1, the token half of the fenced-mutex model: per resource, a lease granted before another in real time (its
     * acquire had completed before the other's was invoked, {@link History.Op#grantedBefore}) has the lower token.
     */
    private static int checkM1(List<History.Op> ops, List<String> examples) {
        Map<String, List<History.Op>> byResource = new TreeMap<>();
        for (History.Op op : ops) {
            if (op.lease().fenced()) {
                byResource.computeIfAbsent(op.resource(), r -> new ArrayList<>()).add(op);
            }
        }
        int violations = 0;
        for (List<History.Op> grants : byResource.values()) {
            grants.sort(java.util.Comparator.comparingLong(History.Op::acquiredAt));
            for (History.Op later : grants) {
                for (History.Op earlier : grants) {
                    if (earlier.acquiredAt() - later.acquireInvokedAt() >= 0) {
                        break; // sorted by completion: no further grant completed before this acquire was invoked
                    }
                    if (earlier.token() >= later.token()) {
                        violations++;
                        example(examples, "M1", later.resource() + ": " + later.id() + " got token " + later.token()
                                + ", not above " + earlier.id() + "'s " + earlier.token() + ", granted "
                                + (later.acquireInvokedAt() - earlier.acquiredAt()) / 1_000_000 + " ms before it was asked for");
                        break;
                    }
                }
            }
        }
        return violations;
    }

    /**
     * M2, the exclusion half of the fenced-mutex model: per resource, no two acknowledged holds overlap. A hold runs
     * from when the acquire returned the lease to the first of: its release was invoked, its loss was signalled, its
     * local validity deadline (sampled while held; it already subtracts the client's drift allowance from the lease
     * as the lock service counts it). All clients of a run are in one JVM, so one monotonic clock orders them.
     */
    private static int checkM2(List<History.Op> ops, List<String> examples) {
        Map<String, List<History.Op>> byResource = new TreeMap<>();
        for (History.Op op : ops) {
            if (op.lease().fenced()) {
                byResource.computeIfAbsent(op.resource(), r -> new ArrayList<>()).add(op);
            }
        }
        int violations = 0;
        for (List<History.Op> holds : byResource.values()) {
            holds.sort(java.util.Comparator.comparingLong(History.Op::acquiredAt));
            History.Op latest = null;
            for (History.Op hold : holds) {
                if (latest != null && hold.acquiredAt() - holdEnd(latest) < 0) {
                    violations++;
                    example(examples, "M2", hold.resource() + ": " + hold.id() + " (token " + hold.token() + ") was granted "
                            + (holdEnd(latest) - hold.acquiredAt()) / 1_000_000 + " ms before the hold of " + latest.id()
                            + " (token " + latest.token() + ") ended");
                }
                if (latest == null || holdEnd(hold) - holdEnd(latest) > 0) {
                    latest = hold;
                }
            }
        }
        return violations;
    }

    /** When a hold ended, as its holder knew it: release, loss signal or local deadline, whichever came first. */
    private static long holdEnd(History.Op op) {
        Grant.LeaseRecord lease = op.lease();
        long end = lease.deadline();
        if (lease.releasedAt() != 0 && lease.releasedAt() - end < 0) {
            end = lease.releasedAt();
        }
        if (lease.lostAt() != 0 && lease.lostAt() - end < 0) {
            end = lease.lostAt();
        }
        return end;
    }

    private static int count(List<History.Op> ops, History.Outcome outcome) {
        return (int) ops.stream().filter(op -> op.outcome() == outcome).count();
    }

    private static long percentile(List<Long> sorted, int p) {
        if (sorted.isEmpty()) {
            return Long.MIN_VALUE;
        }
        int index = (int) Math.ceil(p / 100.0 * sorted.size()) - 1;
        return sorted.get(Math.max(0, Math.min(sorted.size() - 1, index)));
    }

    private static void example(List<String> examples, String invariant, String text) {
        if (examples.stream().filter(e -> e.startsWith(invariant)).count() < MAX_EXAMPLES) {
            examples.add(invariant + " " + text);
        }
    }

    /**
     * The summary of one run.
     *
     * @param setChecked the run had the lock-set workload: I7 applies
     * @param noLossSignals the arm has no loss signal (plain TTL): I5 does not apply
     */
    record Result(String scenario, Arm arm, int operations, int accepted, int staleRejected, int lost, int unknown,
            int acquireFailures, int lossSignals, int i1, int i2, int i3, int i4, int i5, int i6, int i7,
            boolean setChecked, int m1, int m2, Mutex mutex, long lossP50Nanos, long lossP99Nanos,
            boolean noLossSignals, List<String> examples) {

        /** Every violation, M2 only where the run expects exclusion to hold ({@link Mutex#FULL}). */
        int violations() {
            return i1 + i2 + i3 + i4 + i5 + i6 + i7 + m1 + (mutex == Mutex.FULL ? m2 : 0);
        }
    }

    /** Which half of the fenced-mutex model check applies to a run. */
    enum Mutex {
        /** Not checked. */
        NONE,
        /** M1 and M2: tokens grow with every grant, and no two holds overlap. */
        FULL,
        /**
         * M1 only: a failover to a replica that missed grants, or a lock server whose clock steps forward (its keys
         * expire early), hands a lock to a second holder while the first still believes it holds it, so M2 is
         * reported, not held against the run; the tokens must still grow.
         */
        TOKEN_ORDER_ONLY
    }
}
