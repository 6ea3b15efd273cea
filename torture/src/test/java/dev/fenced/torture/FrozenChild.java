package dev.fenced.torture;

import dev.fenced.lock.LossReason;
import dev.fenced.lock.ReleaseOutcome;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link ChildWorker} in a child JVM, and the freeze the nemesis puts it through: after the child checked
 * that its lease is held, the whole process is stopped with {@code kill -STOP}; while it is frozen another
 * holder takes the lock (which can only happen once the child's lease expired in the lock service, so the freeze is
 * longer than the lease by construction) and writes; then {@code kill -CONT}, and the child writes with the
 * lease it believed held. The child is killed on {@link #close()} and at JVM exit.
 */
final class FrozenChild implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(FrozenChild.class);
    private static final long REPLY_TIMEOUT_SECONDS = 60;
    /** The system property that switches the PostgreSQL store's shared statements on (PostgresLeaseStore's). */
    private static final String SHARED_STATEMENTS = "dev.fenced.postgres.batching";

    private final Arm arm;
    private final Process process;
    private final PrintWriter toChild;
    private final BlockingQueue<String> replies = new LinkedBlockingQueue<>();
    private final Thread killer;

    private FrozenChild(Arm arm, Process process) {
        this.arm = arm;
        this.process = process;
        this.toChild = new PrintWriter(new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8), true);
        this.killer = new Thread(process::destroyForcibly, "torture-child-killer");
        Runtime.getRuntime().addShutdownHook(killer);
        Thread reader = new Thread(this::readReplies, "torture-child-reader-" + process.pid());
        reader.setDaemon(true);
        reader.start();
    }

    /** Starts the child and waits until it is connected and ready. */
    static FrozenChild start(Arm arm, Locker.Endpoint endpoint, String r2dbcUrl, Ledger ledger, String prefix,
            Duration leaseTime) {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> command = new ArrayList<>(List.of(java, "-Xmx160m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"));
        // The PostgreSQL store's switch for shared statements reaches the child too, so that a run with it on
        // tortures the child's store as it does the workers'.
        String sharing = System.getProperty(SHARED_STATEMENTS);
        if (sharing != null) {
            command.add("-D" + SHARED_STATEMENTS + "=" + sharing);
        }
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), ChildWorker.class.getName(),
                arm.name(), endpoint.encode(), r2dbcUrl, ledger.accounts, ledger.audit, prefix, Long.toString(leaseTime.toMillis())));
        Process process;
        try {
            process = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        } catch (IOException e) {
            throw new UncheckedIOException("Could not start the child JVM worker", e);
        }
        FrozenChild child = new FrozenChild(arm, process);
        try {
            child.expect("READY");
        } catch (RuntimeException e) {
            child.close();
            throw e;
        }
        return child;
    }

    long pid() {
        return process.pid();
    }

    /**
     * One frozen operation on {@code resource}; {@code whileFrozen} runs while the child is stopped.
     *
     * @return the child's operation, for the history
     */
    History.Op freezeRound(String resource, String opId, History history, Runnable whileFrozen) {
        toChild.println("OP " + resource + " " + opId);
        String[] paused = expect("PAUSED");
        long token = Long.parseLong(paused[1]);
        String owner = paused[2];
        long acquiredAt = Long.parseLong(paused[3]);
        long acquireInvokedAt = Long.parseLong(paused[4]);
        history.knownOwner(owner);
        signal("STOP");
        long stoppedAt = System.nanoTime();
        long thawedAt;
        try {
            whileFrozen.run();
        } finally {
            signal("CONT");
            thawedAt = System.nanoTime();
        }
        history.fault("sigstop", stoppedAt, thawedAt);
        toChild.println("GO");
        String[] result = expect("RESULT");
        Grant.LeaseRecord lease = new Grant.LeaseRecord(arm != Arm.PLAIN_TTL, Long.parseLong(result[4]), thawedAt,
                Long.parseLong(result[5]), "null".equals(result[6]) ? null : LossReason.valueOf(result[6]),
                Long.parseLong(result[7]), "null".equals(result[8]) ? null : ReleaseOutcome.valueOf(result[8]));
        return new History.Op(opId, "child-jvm", resource, token, owner, History.Outcome.valueOf(result[1]),
                History.Step.WRITE, acquireInvokedAt, acquiredAt, Long.parseLong(result[2]), Long.parseLong(result[3]), true, true, lease,
                "frozen with SIGSTOP for " + (thawedAt - stoppedAt) / 1_000_000 + " ms", null);
    }

    private void signal(String signal) {
        try {
            Process kill = new ProcessBuilder("kill", "-" + signal, Long.toString(process.pid())).inheritIO().start();
            if (!kill.waitFor(10, TimeUnit.SECONDS) || kill.exitValue() != 0) {
                throw new IllegalStateException("kill -" + signal + " " + process.pid() + " failed");
            }
        } catch (IOException e) {
            throw new UncheckedIOException("Could not run kill -" + signal, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("Interrupted while sending SIG" + signal, e);
        }
    }

    private String[] expect(String kind) {
        String line = null;
        try {
            for (long waited = 0; line == null && waited < REPLY_TIMEOUT_SECONDS; waited++) {
                line = replies.poll(1, TimeUnit.SECONDS);
                if (line == null && !process.isAlive()) {
                    line = replies.poll();
                    break;
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("Interrupted while waiting for the child's " + kind, e);
        }
        if (line == null) {
            throw new IllegalStateException("The child JVM (pid " + process.pid() + ") sent no " + kind + " within "
                    + REPLY_TIMEOUT_SECONDS + " s" + (process.isAlive() ? "" : "; it exited with " + process.exitValue()));
        }
        String[] parts = line.split(" ");
        if (!parts[0].equals(kind)) {
            throw new IllegalStateException("The child JVM sent '" + line + "' where " + kind + " was expected");
        }
        return parts;
    }

    private void readReplies() {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.startsWith("@@")) {
                    replies.add(line.substring(2));
                } else {
                    LOG.debug("child {}: {}", process.pid(), line);
                }
            }
        } catch (IOException e) {
            LOG.debug("The child's output closed", e);
        }
    }

    @Override
    public void close() {
        try {
            toChild.println("EXIT");
            toChild.close();
            if (!process.waitFor(5, TimeUnit.SECONDS)) {
                process.destroyForcibly();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            process.destroyForcibly();
        } finally {
            // A stopped process ignores SIGTERM until continued; SIGKILL is delivered regardless.
            if (process.isAlive()) {
                process.destroyForcibly();
            }
            try {
                Runtime.getRuntime().removeShutdownHook(killer);
            } catch (IllegalStateException e) {
                // Already shutting down: the hook runs anyway.
            }
        }
    }
}
