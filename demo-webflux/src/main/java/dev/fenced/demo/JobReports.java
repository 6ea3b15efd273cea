package dev.fenced.demo;

import dev.fenced.lock.FencedLease;
import dev.fenced.r2dbc.FencedWrite;
import io.r2dbc.spi.Connection;
import org.springframework.r2dbc.core.DatabaseClient;
import org.springframework.stereotype.Repository;
import reactor.core.publisher.Mono;

/** The scheduled job's output: one row per job, written by each tick with a fenced upsert. */
@Repository
class JobReports {

    static final String TABLE = "job_reports";

    private static final String SCHEMA = """
            CREATE TABLE IF NOT EXISTS job_reports (
              job text PRIMARY KEY,
              tick integer NOT NULL,
              written_by text NOT NULL,
              fencing_token bigint,
              fencing_owner text
            )""";

    private final DatabaseClient db;

    JobReports(DatabaseClient db) {
        this.db = db;
    }

    /** Creates the table if needed. */
    Mono<Void> create() {
        return db.sql(SCHEMA).then();
    }

    /** Writes tick {@code tick} of {@code job} by {@code instance} under {@code lease}, on {@code connection}. */
    static Mono<Long> write(Connection connection, String job, int tick, String instance, FencedLease lease) {
        return FencedWrite.into(TABLE).key("job", job)
                .set("tick", tick)
                .set("written_by", instance)
                .upsert(connection, lease);
    }

    /** The row of {@code job}; empty if no tick wrote it. */
    Mono<JobReportRow> find(String job) {
        return db.sql("SELECT job, tick, written_by, fencing_token FROM job_reports WHERE job = :job")
                .bind("job", job)
                .map(row -> new JobReportRow(row.get("job", String.class), row.get("tick", Integer.class),
                        row.get("written_by", String.class), row.get("fencing_token", Long.class)))
                .one();
    }
}
