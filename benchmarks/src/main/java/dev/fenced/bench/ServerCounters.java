package dev.fenced.bench;

/** What a lock service has been asked, read before and after a workload. */
interface ServerCounters {

    /** Round trips from clients so far: scripts and pub/sub commands on Redis, statements on PostgreSQL. */
    long requests();

    /** Commands the server executed so far (on Redis including those inside scripts; on PostgreSQL, statements). */
    long commands();
}
