package dev.fenced.bench;

/**
 * A workload could not run as specified (a lock that should have been free was held, a lease was lost
 * while held, a service did not answer): the run is void, so the harness stops rather than report a number.
 */
final class BenchmarkException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private BenchmarkException(String message, Throwable cause) {
        super(message, cause);
    }

    private BenchmarkException(String message) {
        super(message);
    }

    /** A lock on a name no one else uses was not granted at the first attempt. */
    static BenchmarkException notAcquired(String lock, String name) {
        return new BenchmarkException(lock + " did not grant the free lock " + name);
    }

    /** Leases were lost while the workload held them, so renewal did not keep up. */
    static BenchmarkException leasesLost(String lock, long lost, int held) {
        return new BenchmarkException(lock + " lost " + lost + " of " + held + " held leases while held");
    }

    /** Fewer leases than asked for were acquired. */
    static BenchmarkException tooFewLeases(String lock, int expected, long acquired) {
        return new BenchmarkException(lock + " acquired " + acquired + " of " + expected + " leases");
    }

    /** The fleet view listed another number of locks than were held. */
    static BenchmarkException listedWrongly(String store, int held, long listed) {
        return new BenchmarkException("The fleet view on " + store + " listed " + listed + " of " + held + " held locks");
    }

    /** A service the harness needs could not be set up. */
    static BenchmarkException setUp(String what, Throwable cause) {
        return new BenchmarkException("Could not set up " + what + ": " + cause.getMessage(), cause);
    }

    /** A plain (unfenced) write found no row, so the storage workload's table is not what it created. */
    static BenchmarkException rowMissing(String table, long id) {
        return new BenchmarkException("No row " + id + " in " + table);
    }
}
