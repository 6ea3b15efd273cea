package dev.fenced.torture;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * The worker that runs in a child JVM so that the nemesis can freeze the whole process with {@code SIGSTOP}:
 * its renewal thread, event loops and timers stop together, as in a real stop-the-world pause.
 *
 * <p>Protocol, one line each way: the parent sends {@code OP <resource> <opId>}; the child acquires, claims
 * and reads, checks that its lease is held and answers {@code @@PAUSED <token> <owner> <acquiredAt> <acquireInvokedAt>}, then
 * waits for {@code GO}. The parent freezes it after {@code PAUSED} and sends {@code GO} after thawing it; the
 * child then writes with the lease it believed held, releases, and answers {@code @@RESULT ...}. {@code EXIT}
 * ends it. Lines not starting with {@code @@} are logging. Times are {@link System#nanoTime()}.
 *
 * <p>Arguments: arm, the lock service ({@link Locker.Endpoint#encode()}: Redis or the PostgreSQL lease table), R2DBC
 * URL of the ledger's database, account table, audit table, key prefix, lease time in ms.
 */
public final class ChildWorker {

    private ChildWorker() {
    }

    /**
     * Runs the child worker until {@code EXIT} or the end of standard input.
     *
     * @param args arm, encoded lock service endpoint, R2DBC URL, account table, audit table, key prefix, lease time in ms
     * @throws Exception on any failure, which ends the child with a stack trace on standard error
     */
    public static void main(String[] args) throws Exception {
        Arm arm = Arm.valueOf(args[0]);
        Duration leaseTime = Duration.ofMillis(Long.parseLong(args[6]));
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try (Locker locker = Locker.create(arm, Locker.Endpoint.decode(args[1]), args[5], leaseTime, Duration.ofSeconds(10),
                "child");
                Ledger ledger = Ledger.open(args[2], args[3], args[4])) {
            // Connect and load scripts before the first real operation: a cold first acquire can outlast a lease.
            locker.acquire("warm-up").release();
            ledger.balances();
            out.println("@@READY");
            String line;
            while ((line = in.readLine()) != null && line.startsWith("OP ")) {
                String[] parts = line.split(" ");
                operate(arm, locker, ledger, parts[1], parts[2], in, out);
            }
        }
        System.exit(0);
    }

    private static void operate(Arm arm, Locker locker, Ledger ledger, String resource, String opId, BufferedReader in,
            PrintStream out) throws Exception {
        Grant grant = null;
        long balance = 0;
        long acquireInvokedAt = 0;
        for (int attempt = 1; grant == null; attempt++) {
            // The nemesis may be restarting the lock service, or the machine is slow: retry (with back-off) what wrote nothing.
            try {
                acquireInvokedAt = System.nanoTime();
                Grant candidate = locker.acquire(resource);
                try {
                    balance = ledger.claimAndRead(arm, candidate);
                    grant = candidate;
                } finally {
                    if (grant == null) {
                        candidate.release();
                    }
                }
            } catch (RuntimeException e) {
                if (attempt == 50) {
                    throw e;
                }
                Thread.sleep(50);
            }
        }
        long acquiredAt = System.nanoTime();
        Grant held = grant;
        Thread sampler = new Thread(() -> {
            while (!Thread.currentThread().isInterrupted()) {
                held.sampleDeadline();
                try {
                    Thread.sleep(5);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "deadline-sampler");
        sampler.setDaemon(true);
        sampler.start();
        if (!grant.isHeld()) {
            out.println("@@FAILED the lease was lost before the pause point");
            return;
        }
        out.println("@@PAUSED " + grant.token() + " " + grant.owner() + " " + acquiredAt + " " + acquireInvokedAt);
        String go = in.readLine();
        if (!"GO".equals(go)) {
            throw new IllegalStateException("Expected GO, got " + go);
        }
        long writeInvokedAt = System.nanoTime();
        String outcome;
        try {
            ledger.write(arm, grant, arm == Arm.PLAIN_TTL ? null : grant.believed(), balance + 1, opId);
            outcome = "OK";
        } catch (RuntimeException e) {
            outcome = Worker.isStale(e) ? "STALE" : "UNKNOWN";
        }
        long completedAt = System.nanoTime();
        try {
            grant.release();
        } catch (RuntimeException e) {
            // Expires by itself; the record shows whether the loss was signalled.
        }
        sampler.interrupt();
        Grant.LeaseRecord lease = grant.record();
        out.println("@@RESULT " + outcome + " " + writeInvokedAt + " " + completedAt + " " + lease.deadline() + " "
                + lease.lostAt() + " " + lease.lossReason() + " " + lease.releasedAt() + " " + lease.releaseOutcome());
    }
}
