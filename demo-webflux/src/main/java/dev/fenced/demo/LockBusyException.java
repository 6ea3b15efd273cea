package dev.fenced.demo;

/** A single attempt found the lock held (the acquire completed empty); mapped to 409 with Retry-After. */
final class LockBusyException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private final String lockName;

    LockBusyException(String lockName) {
        super("Lock " + lockName + " is held by someone else");
        this.lockName = lockName;
    }

    String lockName() {
        return lockName;
    }
}
