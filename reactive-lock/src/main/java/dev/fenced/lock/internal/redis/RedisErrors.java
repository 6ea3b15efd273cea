package dev.fenced.lock.internal.redis;

import dev.fenced.lock.FencedLockException;
import dev.fenced.lock.LockServiceException;
import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisCommandTimeoutException;
import io.lettuce.core.RedisConnectionException;
import io.lettuce.core.RedisException;
import java.io.IOException;
import java.time.Duration;
import java.util.concurrent.TimeoutException;

/** The one place where driver errors become Fenced's exceptions. */
final class RedisErrors {

    private RedisErrors() {
    }

    /**
     * Classifies a failure of a Redis operation.
     *
     * @param error the failure
     * @param lockName the lock concerned, or the empty string
     * @param operation what was attempted
     * @param timeout the command timeout in force
     * @return a {@link FencedLockException}: the error itself if it already is one
     */
    static FencedLockException classify(Throwable error, String lockName, String operation, Duration timeout) {
        if (error instanceof FencedLockException fenced) {
            return fenced;
        }
        String detail;
        if (error instanceof WaitedTooLongException) {
            detail = error.getMessage();
        } else if (error instanceof ConnectTimeoutException) {
            detail = "cannot connect to Redis within " + ((ConnectTimeoutException) error).connectTimeout.toMillis() + " ms";
        } else if (error instanceof NotConnectedException) {
            detail = "not connected to Redis (reconnecting)";
        } else if (error instanceof TimeoutException || error instanceof RedisCommandTimeoutException) {
            detail = "no reply within the command timeout of " + timeout.toMillis() + " ms";
        } else if (error instanceof RedisConnectionException || error instanceof IOException
                || error.getCause() instanceof IOException) {
            detail = "cannot connect to Redis (" + error.getMessage() + ")";
        } else if (error instanceof RedisCommandExecutionException) {
            detail = "Redis answered with an error: " + error.getMessage();
        } else if (error instanceof RedisException) {
            // Lettuce reports "Connection closed", "Currently not connected. Commands are rejected." etc.
            detail = "not connected to Redis (" + error.getMessage() + ")";
        } else {
            detail = "unexpected " + error.getClass().getSimpleName() + ": " + error.getMessage();
        }
        return LockServiceException.of(lockName, operation, detail, error);
    }

    /**
     * Whether a failure came before the command left this process: the connection was down (refused
     * rather than buffered), could not be opened, or was closed with the client. Such a command did nothing.
     * A timeout, a reset or a server error may come after the command ran.
     *
     * @param error a failure, classified or not
     * @return whether the command certainly never reached Redis
     */
    static boolean neverSent(Throwable error) {
        Throwable cause = error instanceof LockServiceException && error.getCause() != null ? error.getCause() : error;
        return cause instanceof NotConnectedException
                || cause instanceof WaitedTooLongException
                || cause instanceof RedisConnectionException
                || (cause instanceof RedisException && String.valueOf(cause.getMessage()).startsWith("Currently not connected"))
                || cause instanceof LazyConnection.ClosedException;
    }

    /** A lock command refused because its connection is down: it must never wait in a reconnect buffer. */
    static class NotConnectedException extends RuntimeException {

        private static final long serialVersionUID = 1L;

        NotConnectedException() {
            this("not connected to Redis");
        }

        NotConnectedException(String message) {
            super(message, null, false, false);
        }
    }

    /**
     * Whether Redis refused a command because the user's ACL does not allow it (or one of its keys or channels).
     *
     * @param error a failure, classified or not
     * @return whether it is that refusal
     */
    static boolean noPermission(Throwable error) {
        Throwable cause = error instanceof LockServiceException && error.getCause() != null ? error.getCause() : error;
        return cause instanceof RedisCommandExecutionException && String.valueOf(cause.getMessage()).startsWith("NOPERM");
    }

    /** A lock command whose connection could not be opened within the connect timeout: it never left. */
    static final class ConnectTimeoutException extends NotConnectedException {

        private static final long serialVersionUID = 1L;

        private final transient Duration connectTimeout;

        ConnectTimeoutException(Duration connectTimeout) {
            super("no connection within " + connectTimeout.toMillis() + " ms");
            this.connectTimeout = connectTimeout;
        }
    }

    /**
     * Whether Redis refused a call because its keys span hash slots ({@code CROSSSLOT}: a proxy or a sharded
     * service behind one address). Such a call ran nothing.
     *
     * @param error a failure, classified or not
     * @return whether it is that refusal
     */
    static boolean crossSlot(Throwable error) {
        Throwable cause = error instanceof LockServiceException && error.getCause() != null ? error.getCause() : error;
        return cause instanceof RedisCommandExecutionException && String.valueOf(cause.getMessage()).startsWith("CROSSSLOT");
    }

    /** A lock command that waited longer than the command timeout for a call to carry it, and was never sent. */
    static final class WaitedTooLongException extends RuntimeException {

        private static final long serialVersionUID = 1L;

        WaitedTooLongException(Duration timeout) {
            super("waited longer than the command timeout of " + timeout.toMillis()
                    + " ms for a call to Redis (too many lock commands in flight); never sent", null, false, false);
        }
    }
}
