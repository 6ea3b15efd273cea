package dev.fenced.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import reactor.test.StepVerifier;

/** Every builder and options setter validates at once, with a message that names the setting. */
class FencedLockClientBuilderTest {

    @Test
    void buildWithoutAnAddressFails() {
        assertThatThrownBy(() -> FencedLockClient.builder().build())
                .isInstanceOf(IllegalStateException.class)
                .hasMessage("A Redis address is required: call redisUri(...), redisClient(...), redisCluster(...) "
                        + "or redisClusterClient(...); or postgres(...) for locks on PostgreSQL");
    }

    @Test
    void replicaAcknowledgementIsRefusedForPostgres() {
        io.r2dbc.spi.ConnectionFactory neverUsed = io.r2dbc.spi.ConnectionFactories.get("r2dbc:postgresql://nobody@127.0.0.1:1/none");
        assertThatThrownBy(() -> FencedLockClient.builder().postgres(neverUsed)
                .replicaAcknowledgement(1, java.time.Duration.ofMillis(100)).build())
                .isInstanceOf(IllegalStateException.class)
                .hasMessage("replicaAcknowledgement(...) applies to Redis only; PostgreSQL's replication is the database's "
                        + "(synchronous_commit)");
    }

    @Test
    void leaseTableNamesAreValidated() {
        assertThat(PostgresLeaseTable.named("locks.fenced_lease").name()).isEqualTo("locks.fenced_lease");
        assertThatThrownBy(() -> PostgresLeaseTable.named("lease; DROP TABLE x"))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("Not a valid lease table name: 'lease; DROP TABLE x' (use letters, digits and underscores, "
                        + "not starting with a digit, at most 63 characters; it may be schema-qualified)");
        assertThatThrownBy(() -> PostgresLeaseTable.named("a.b.c")).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> PostgresLeaseTable.named("1leases")).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void leaseTableDdlNamesTheTable() {
        assertThat(PostgresLeaseTable.named("locks.my_leases").ddl())
                .contains("CREATE TABLE IF NOT EXISTS \"locks\".\"my_leases\" (")
                .doesNotContain("fenced_lease");
    }

    @Test
    void clusterNeedsAtLeastOneParsableSeed() {
        assertThatThrownBy(() -> FencedLockClient.builder().redisCluster())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("At least one cluster node URI is required");
        assertThatThrownBy(() -> FencedLockClient.builder().redisCluster("redis://127.0.0.1:7000", "not a uri"))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageStartingWith("Not a valid Redis URI: 'not a uri'");
    }

    @Test
    void replicaAcknowledgementNeedsAReplicaAndATimeoutShorterThanTheCommandTimeout() {
        assertThatThrownBy(() -> FencedLockClient.builder().replicaAcknowledgement(0, Duration.ofMillis(100)))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("replicas must be at least 1, was 0");
        assertThatThrownBy(() -> FencedLockClient.builder().replicaAcknowledgement(1, Duration.ZERO))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("timeout");
        assertThatThrownBy(() -> FencedLockClient.builder().redisUri("redis://127.0.0.1:6379")
                        .leaseTime(Duration.ofSeconds(3)).replicaAcknowledgement(1, Duration.ofSeconds(1)).build())
                .isInstanceOf(IllegalStateException.class)
                .hasMessage("The replica acknowledgement timeout (PT1S) must be shorter than the command timeout (PT1S): "
                        + "WAIT is a command");
    }

    @Test
    void unparsableUriFails() {
        assertThatThrownBy(() -> FencedLockClient.builder().redisUri("not a uri"))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageStartingWith("Not a valid Redis URI: 'not a uri'");
    }

    @Test
    void leaseTimeOutOfRangeFails() {
        assertThatThrownBy(() -> FencedLockClient.builder().leaseTime(Duration.ZERO))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("leaseTime must be between 10 ms and 1 day, was PT0S");
        assertThatThrownBy(() -> FencedLockClient.builder().leaseTime(Duration.ofDays(2)))
                .hasMessage("leaseTime must be between 10 ms and 1 day, was PT48H");
        assertThatThrownBy(() -> FencedLockClient.builder().leaseTime(null))
                .isInstanceOf(NullPointerException.class)
                .hasMessage("leaseTime must not be null");
    }

    @Test
    void negativeOrZeroPeriodsFail() {
        assertThatThrownBy(() -> FencedLockClient.builder().renewalPeriod(Duration.ofSeconds(-1)))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("renewalPeriod must be positive and at most PT24H, was PT-1S");
        assertThatThrownBy(() -> FencedLockClient.builder().commandTimeout(Duration.ZERO))
                .hasMessage("commandTimeout must be positive and at most PT24H, was PT0S");
        assertThatThrownBy(() -> FencedLockClient.builder().maxWait(Duration.ofMillis(-1)))
                .hasMessage("maxWait must be between 0 and 1 day, was PT-0.001S");
    }

    @Test
    void renewalPeriodMustBeShorterThanTheLeaseTime() {
        FencedLockClientBuilder builder = FencedLockClient.builder().redisUri("redis://127.0.0.1:6379")
                .leaseTime(Duration.ofSeconds(3)).renewalPeriod(Duration.ofSeconds(3));
        assertThatThrownBy(builder::build)
                .isInstanceOf(IllegalStateException.class)
                .hasMessage("renewalPeriod (PT3S) must be shorter than leaseTime (PT3S)");
    }

    @Test
    void commandTimeoutMustBeShorterThanTheLeaseTime() {
        FencedLockClientBuilder builder = FencedLockClient.builder().redisUri("redis://127.0.0.1:6379")
                .leaseTime(Duration.ofSeconds(1)).commandTimeout(Duration.ofSeconds(2));
        assertThatThrownBy(builder::build)
                .isInstanceOf(IllegalStateException.class)
                .hasMessage("commandTimeout (PT2S) must be shorter than leaseTime (PT1S)");
    }

    @Test
    void settingsThatWouldLoseEveryLeaseAreRefused() {
        // A renewal sent at the end of its 29.8 s period may take the whole 5 s command timeout: it would land
        // after the 30 s lease ran out, so every lease would be lost at its first renewal.
        FencedLockClientBuilder builder = FencedLockClient.builder().redisUri("redis://127.0.0.1:6379")
                .renewalPeriod(Duration.ofMillis(29_800));
        assertThatThrownBy(builder::build)
                .isInstanceOf(IllegalStateException.class)
                .hasMessage("renewalPeriod (PT29.8S) + commandTimeout (PT5S) must be shorter than leaseTime (PT30S) less "
                        + "the clock-drift allowance (PT0.302S): a renewal sent at the end of its period that takes the whole "
                        + "command timeout must land before the lease runs out, or every lease is lost");
        assertThat(FencedLockClient.builder().redisUri("redis://127.0.0.1:6379").renewalPeriod(Duration.ofSeconds(24)).build())
                .as("24 s + 5 s < 30 s - 302 ms").isNotNull().satisfies(FencedLockClient::close);
    }

    @Test
    void aPerCallLeaseTimeThatWouldBeLostAtItsFirstRenewalIsRefused() {
        try (FencedLockClient client = FencedLockClient.builder().redisUri("redis://127.0.0.1:1")
                .leaseTime(Duration.ofSeconds(30)).renewalPeriod(Duration.ofSeconds(20)).commandTimeout(Duration.ofSeconds(5))
                .build()) {
            // Renewed at the same ratio, 2/3 of 9 s is 6 s; 6 s + 5 s is past the 9 s lease.
            StepVerifier.create(client.acquire("x", AcquireOptions.defaults().withLeaseTime(Duration.ofSeconds(9))))
                    .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(IllegalArgumentException.class)
                            .hasMessage("renewalPeriod (PT6S) + commandTimeout (PT5S) must be shorter than leaseTime (PT9S) "
                                    + "less the clock-drift allowance (PT0.092S): a renewal sent at the end of its period that "
                                    + "takes the whole command timeout must land before the lease runs out, or every lease "
                                    + "is lost"));
        }
    }

    @Test
    void keyPrefixWithBracesFails() {
        assertThatThrownBy(() -> FencedLockClient.builder().keyPrefix("app{1}:"))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("keyPrefix must not contain braces or control characters (they would break the cluster "
                        + "hash tag), was 'app{1}:'");
        assertThatThrownBy(() -> FencedLockClient.builder().keyPrefix("x".repeat(257)))
                .hasMessage("keyPrefix must be at most 256 characters, was 257");
    }

    @Test
    void buildingConnectsToNothing() {
        // Port 1 refuses connections: building must not notice, only the first command does.
        FencedLockClient client = FencedLockClient.builder().redisUri("redis://127.0.0.1:1").build();
        client.close();
        StepVerifier.create(client.acquire("x")).verifyError(LockClientClosedException.class);
    }

    @Test
    void optionsAreValidatedAndCopiedOnWrite() {
        AcquireOptions defaults = AcquireOptions.defaults();
        AcquireOptions shortLease = defaults.withLeaseTime(Duration.ofSeconds(2));
        assertThat(defaults.leaseTime()).isNull();
        assertThat(shortLease.leaseTime()).isEqualTo(Duration.ofSeconds(2));
        assertThat(shortLease.maxWait()).isNull();
        assertThat(AcquireOptions.tryOnce().maxWait()).isZero();
        assertThat(shortLease).isEqualTo(AcquireOptions.defaults().withLeaseTime(Duration.ofSeconds(2)));
        assertThat(shortLease.toString()).isEqualTo("AcquireOptions{leaseTime=PT2S, maxWait=client default}");
        assertThatThrownBy(() -> defaults.withLeaseTime(Duration.ofMillis(5)))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("leaseTime must be between 10 ms and 1 day, was PT0.005S");
        assertThatThrownBy(() -> defaults.withMaxWait(Duration.ofDays(3)))
                .hasMessage("maxWait must be between 0 and 1 day, was PT72H");
    }

    @Test
    void holderLabelsAreRefusedWhenBlankTooLongOrWithControlCharacters() {
        FencedLockClientBuilder builder = FencedLockClient.builder();
        assertThatThrownBy(() -> builder.holderLabel(" ")).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("holderLabel must not be blank");
        assertThatThrownBy(() -> builder.holderLabel("x".repeat(201))).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("holderLabel must be at most 200 characters, was 201");
        assertThatThrownBy(() -> builder.holderLabel("web-1\nFORGED LOG LINE")).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("holderLabel must not contain control characters, was 'web-1?FORGED LOG LINE'");
        assertThatThrownBy(() -> builder.holderLabel("web-1\u2028FORGED line")).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("holderLabel must not contain Unicode format or line/paragraph separator characters,"
                        + " found U+2028 in 'web-1?FORGED line'");
        assertThatThrownBy(() -> builder.holderLabel("web-1 \u202Egnp.exe")).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("holderLabel must not contain Unicode format or line/paragraph separator characters,"
                        + " found U+202E in 'web-1 ?gnp.exe'");
        assertThatThrownBy(() -> builder.holderLabel("web-1\u2029")).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("found U+2029");
        assertThatThrownBy(() -> builder.holderLabel("web-\uD800\u00e9")).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("holderLabel must be valid Unicode: it has an unpaired surrogate at index 4");
        assertThat(builder.holderLabel("web-\uD83D\uDD12")).as("a pair is fine").isSameAs(builder);
        assertThatThrownBy(() -> builder.holderLabel(null)).isInstanceOf(NullPointerException.class)
                .hasMessage("holderLabel must not be null");
        assertThat(builder.holderLabel("x".repeat(200))).isSameAs(builder);
    }

    @Test
    void theDefaultHolderLabelNamesTheApplicationTheHostAndTheProcess() {
        String pid = "(pid " + ProcessHandle.current().pid() + ")";
        assertThat(FencedLockClientBuilder.defaultHolderLabel("orders")).startsWith("orders@").endsWith(" " + pid);
        assertThat(FencedLockClientBuilder.defaultHolderLabel(null)).doesNotContain("@").endsWith(" " + pid);
        String cleaned = FencedLockClientBuilder.defaultHolderLabel("bad\tname" + "y".repeat(300));
        assertThat(cleaned).startsWith("bad?name").hasSize(FencedLockClientBuilder.MAX_HOLDER_LABEL_LENGTH);
    }

    @Test
    void fleetViewAndForceReleaseRefuseBadArgumentsBeforeAnyIo() {
        FencedLockClient unreachable = FencedLockClient.builder().redisUri("redis://127.0.0.1:1").build();
        try {
            StepVerifier.create(unreachable.locks("a{b}*")).verifyErrorSatisfies(e -> assertThat(e)
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("Lock name pattern must not contain braces, was 'a{b}*'"));
            StepVerifier.create(unreachable.lock("")).verifyErrorSatisfies(e -> assertThat(e)
                    .isInstanceOf(IllegalArgumentException.class).hasMessage("Lock name must not be blank"));
            StepVerifier.create(unreachable.forceRelease("job", " ")).verifyErrorSatisfies(e -> assertThat(e)
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("reason must not be blank: say who breaks the lock and why"));
            StepVerifier.create(unreachable.forceRelease("job", "ops\r\nforged")).verifyErrorSatisfies(e -> assertThat(e)
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("reason must not contain control characters, was 'ops??forged'"));
            StepVerifier.create(unreachable.forceRelease("job", "r".repeat(501))).verifyErrorSatisfies(e -> assertThat(e)
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("reason must be at most 500 characters, was 501"));
            StepVerifier.create(unreachable.forceRelease("job", "alice\u2028WARN Force-released lock 'payroll'"))
                    .verifyErrorSatisfies(e -> assertThat(e).isInstanceOf(IllegalArgumentException.class)
                            .hasMessage("reason must not contain Unicode format or line/paragraph separator characters,"
                                    + " found U+2028 in 'alice?WARN Force-released lock 'payroll''"));
            StepVerifier.create(unreachable.forceRelease("job", 0, "ops")).verifyErrorSatisfies(e -> assertThat(e)
                    .isInstanceOf(IllegalArgumentException.class).hasMessage("expectedToken must be positive, was 0"));
            StepVerifier.create(unreachable.forceRelease("a{b}", "ops")).verifyErrorSatisfies(e -> assertThat(e)
                    .isInstanceOf(IllegalArgumentException.class).hasMessage("Lock name must not contain braces, was 'a{b}'"));
            // An unpaired surrogate has no UTF-8 form: "x\uD800\u00e9" and "x\uD800\u01e9" were one key, and listed as none.
            for (String broken : List.of("x\uD800\u00e9", "x\uDC00", "ends high \uD83D", "\uDD12 low first")) {
                StepVerifier.create(unreachable.tryAcquire(broken)).verifyErrorSatisfies(e -> assertThat(e)
                        .isInstanceOf(IllegalArgumentException.class)
                        .hasMessageStartingWith("Lock name must be valid Unicode: it has an unpaired surrogate at index"));
                StepVerifier.create(unreachable.tryAcquireAll(List.of("ok", broken))).verifyError(IllegalArgumentException.class);
            }
            StepVerifier.create(unreachable.locks("x\uD800*")).verifyErrorSatisfies(e -> assertThat(e)
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("Lock name pattern must be valid Unicode: it has an unpaired surrogate at index 1"));
        } finally {
            unreachable.close();
        }
    }
}
