package dev.fenced.r2dbc;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.FencedJob;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.JobOutcome;
import dev.fenced.lock.LeaseLostException;
import dev.fenced.lock.LossReason;
import dev.fenced.lock.StaleFencingTokenException;
import dev.fenced.testservices.PostgresServer;
import dev.fenced.testservices.PostgresServerExtension;
import dev.fenced.testservices.RedisServer;
import dev.fenced.testservices.RedisServerExtension;
import io.lettuce.core.RedisClient;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Mono;

/**
 * A job's fenced writes are guarded by the job's lease, found in its Reactor Context: they carry its token, and a
 * write refused for a newer holder's token loses the lease, so the tick ends {@code LOST}. Two clients stand for two
 * instances, on real Redis and PostgreSQL.
 */
@ExtendWith({RedisServerExtension.class, PostgresServerExtension.class})
class FencedJobWriteIT {

    private static final Duration BOUND = Duration.ofSeconds(30);

    private TestDatabase db;
    private RedisClient inspector;
    private FencedLockClient one;
    private FencedLockClient two;
    private String prefix;
    private String reports;

    @BeforeEach
    void setUp(RedisServer redis, PostgresServer postgres) {
        db = TestDatabase.postgres(postgres);
        inspector = RedisClient.create(redis.uri());
        prefix = "job-write-" + UUID.randomUUID() + ":";
        one = FencedLockClient.builder().redisUri(redis.uri()).keyPrefix(prefix).build();
        two = FencedLockClient.builder().redisUri(redis.uri()).keyPrefix(prefix).build();
        reports = TestDatabase.uniqueName("reports");
        db.execute("CREATE TABLE " + reports + " (id bigint PRIMARY KEY, status text NOT NULL, "
                + "fencing_token bigint, fencing_owner text)", "INSERT INTO " + reports + " (id, status) VALUES (1, 'NONE')");
    }

    @AfterEach
    void tearDown() {
        one.close();
        two.close();
        inspector.shutdown();
        db.execute("DROP TABLE IF EXISTS " + reports);
        db.close();
    }

    private Mono<Long> write(String status) {
        return FencedWrite.into(reports).key("id", 1).set("status", status).guardedBy("report").update(db.connections);
    }

    private List<Object> row() {
        return db.query("SELECT status, fencing_token FROM " + reports + " WHERE id = 1").get(0);
    }

    @Test
    void aJobsFencedWriteCarriesTheJobsToken() {
        FencedJob job = FencedJob.of("report", Duration.ofSeconds(20));

        JobOutcome outcome = one.runJob(job, write("BY-ONE")).block(BOUND);

        assertThat(outcome.status()).isEqualTo(JobOutcome.Status.RAN);
        assertThat(row()).containsExactly("BY-ONE", outcome.token());
    }

    @Test
    void aWriteRefusedForANewerHoldersTokenLosesTheJobsLease() {
        FencedJob job = FencedJob.of("report", Duration.ofSeconds(20));
        // The job stalls past its lease (here: its lock is deleted, as an expiry would), another instance runs the
        // job and writes, then the stalled job's write arrives.
        Mono<Long> stalled = Mono.fromRunnable(() -> inspector.connect().sync().del(prefix + "{report}"))
                .subscribeOn(reactor.core.scheduler.Schedulers.boundedElastic()) // the job runs on an I/O thread
                .then(Mono.defer(() -> two.runJob(job, write("BY-TWO"))))
                .then(write("BY-ONE-LATE"));

        JobOutcome outcome = one.runJob(job, stalled).block(BOUND);

        assertThat(outcome.status()).as("%s", outcome).isEqualTo(JobOutcome.Status.LOST);
        LeaseLostException loss = (LeaseLostException) outcome.error().orElseThrow();
        assertThat(loss.reason()).isEqualTo(LossReason.SUPERSEDED);
        assertThat(loss.getCause()).isInstanceOf(StaleFencingTokenException.class);
        assertThat(row().get(0)).as("the newer instance's write stands").isEqualTo("BY-TWO");
    }
}
