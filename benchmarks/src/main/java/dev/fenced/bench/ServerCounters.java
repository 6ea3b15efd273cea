package dev.fenced.bench;

/** What a lock service has been asked, read before and after a workload. */
interface ServerCounters {

    /** Round trips from clients so far: scripts and pub/sub commands on Redis, statements on PostgreSQL. */
    long requests();

    /** Commands the server executed so far (on Redis including those inside scripts; on PostgreSQL, statements). */
    long commands();

    /**
     * CPU time the server process has used so far, in seconds (user and system), or a negative number when it
     * cannot be read.
     */
    default double cpuSeconds() {
        return -1;
    }
}
