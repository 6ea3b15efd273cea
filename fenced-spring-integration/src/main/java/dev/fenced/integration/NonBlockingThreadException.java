package dev.fenced.integration;

/**
 * A blocking lock operation of {@link FencedLockRegistry} was called on a Reactor non-blocking thread
 * ({@code Schedulers.isInNonBlockingThread()}: a {@code Schedulers.parallel()} worker, a Reactor Netty event
 * loop). Waiting there would stall every task of that thread, possibly the very one that would answer, so the
 * call fails at once, before it waits or sends anything. Call the lock from a thread that may block (a task
 * executor, {@code Schedulers.boundedElastic()}), or use {@link dev.fenced.lock.FencedLockClient} from reactive
 * code.
 *
 * <p>Immutable and thread-safe.
 */
public final class NonBlockingThreadException extends IllegalStateException {

    private static final long serialVersionUID = 1L;

    private final String operation;
    private final String lockKey;
    private final String threadName;

    private NonBlockingThreadException(String operation, String lockKey, String threadName) {
        super("FencedLockRegistry: " + operation + " of lock '" + lockKey + "' blocks the calling thread and was "
                + "called on the non-blocking thread '" + threadName + "'; call it from a thread that may block "
                + "(a task executor, Schedulers.boundedElastic()), or use FencedLockClient from reactive code");
        this.operation = operation;
        this.lockKey = lockKey;
        this.threadName = threadName;
    }

    /**
     * Creates the exception.
     *
     * @param operation the operation, such as {@code lock()} or {@code tryLock(time, unit)}
     * @param lockKey the lock key passed to {@link FencedLockRegistry#obtain(Object)}
     * @param threadName the name of the non-blocking thread
     * @return a new exception
     */
    static NonBlockingThreadException of(String operation, String lockKey, String threadName) {
        return new NonBlockingThreadException(operation, lockKey, threadName);
    }

    /**
     * The refused operation, such as {@code lock()} or {@code tryLock(time, unit)}.
     *
     * @return the operation
     */
    public String operation() {
        return operation;
    }

    /**
     * The lock key the operation was called on.
     *
     * @return the lock key
     */
    public String lockKey() {
        return lockKey;
    }

    /**
     * The name of the non-blocking thread the operation was called on.
     *
     * @return the thread name
     */
    public String threadName() {
        return threadName;
    }
}
