package dev.fenced.lock;

import java.util.List;

/**
 * An operation had to pick one lease from the Reactor Context and found several, none named: inside
 * {@code withLease("invoice:42", a -> withLease("customer:7", b -> ...))} a fenced write does not know
 * whether invoice:42 or customer:7 guards the row, and tokens of different locks must never be compared.
 * Name the lock ({@link FencedLease#current(String)}, or the guard of the fenced write). Raised before any
 * I/O. Immutable and thread-safe.
 */
public final class AmbiguousLeaseException extends FencedLockException {

    private static final long serialVersionUID = 1L;

    private final List<String> lockNames;

    private AmbiguousLeaseException(String what, List<String> lockNames) {
        super("", what + " cannot tell which lease to use: the Reactor Context holds leases on "
                + String.join(", ", lockNames.stream().map(n -> "'" + n + "'").toList())
                + "; name the lock that guards it", null);
        this.lockNames = List.copyOf(lockNames);
    }

    /**
     * Creates the exception.
     *
     * @param what the operation that needed a lease, as the start of the message (e.g. "A fenced write of invoices")
     * @param lockNames the names of the leases in the Context, outermost first
     * @return a new exception
     */
    public static AmbiguousLeaseException of(String what, List<String> lockNames) {
        return new AmbiguousLeaseException(what, lockNames);
    }

    /**
     * The names of the leases the Context holds, outermost first.
     *
     * @return the names
     */
    public List<String> lockNames() {
        return lockNames;
    }
}
