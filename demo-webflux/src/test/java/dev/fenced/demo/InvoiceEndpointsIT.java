package dev.fenced.demo;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.testservices.RedisServerExtension;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.web.reactive.function.client.WebClientResponseException;
import reactor.core.publisher.Flux;

/** Acquire-then-write over HTTP, and how each failure is answered (RFC 9457 problem details). */
final class InvoiceEndpointsIT extends DemoTestSupport {

    @Test
    void processWritesTheInvoiceWithTheTokenOfItsLease() {
        freshInvoices(100_001, 100_001);

        ProcessResult result = client().post().uri("/invoices/100001/process").exchange()
                .expectStatus().isOk()
                .expectBody(ProcessResult.class).returnResult().getResponseBody();

        assertThat(result).isNotNull();
        assertThat(result.lockName()).isEqualTo("invoice:100001");
        assertThat(result.token()).isPositive();
        assertThat(result.invoice().fencingToken()).isEqualTo(result.token());
        assertThat(result.invoice().status()).isEqualTo("PROCESSED");
        assertThat(result.invoice().ledgerTotal()).isEqualTo(100);
        Invoice stored = stored(100_001);
        assertThat(stored).isEqualTo(result.invoice());
        client().get().uri("/invoices/100001").exchange()
                .expectStatus().isOk()
                .expectBody(Invoice.class).isEqualTo(stored);
    }

    @Test
    void concurrentRequestsOnOneInvoiceAreSerializedWithIncreasingTokens() {
        freshInvoices(100_010, 100_010);

        List<ProcessResult> results = Flux.range(0, 50)
                .flatMap(i -> webClient().post().uri("/invoices/100010/process").retrieve()
                        .bodyToMono(ProcessResult.class), 50)
                .collectList()
                .block(Duration.ofSeconds(120));

        assertThat(results).hasSize(50);
        // Serialized: every request saw the previous one's write, so none was lost.
        Invoice stored = stored(100_010);
        assertThat(stored.timesProcessed()).isEqualTo(50);
        assertThat(stored.ledgerTotal()).isEqualTo(50 * 100);
        List<ProcessResult> inWriteOrder = results.stream()
                .sorted(Comparator.comparingInt(r -> r.invoice().timesProcessed()))
                .toList();
        assertThat(inWriteOrder).extracting(r -> r.invoice().timesProcessed())
                .containsExactlyElementsOf(java.util.stream.IntStream.rangeClosed(1, 50).boxed().toList());
        assertThat(inWriteOrder).extracting(ProcessResult::token).isSortedAccordingTo(Comparator.naturalOrder())
                .doesNotHaveDuplicates();
        assertThat(stored.fencingToken()).isEqualTo(inWriteOrder.get(49).token());
    }

    @Test
    void busyLockIsAConflictWithRetryAfter() {
        freshInvoices(100_020, 100_020);
        try (FencedLockClient other = otherClient()) {
            FencedLease held = other.acquire("invoice:100020").block(Duration.ofSeconds(10));
            assertThat(held).isNotNull();

            client().post().uri("/invoices/100020/process?maxWaitMs=200").exchange()
                    .expectStatus().isEqualTo(HttpStatus.CONFLICT)
                    .expectHeader().valueEquals("Retry-After", "1")
                    .expectHeader().contentType(MediaType.APPLICATION_PROBLEM_JSON)
                    .expectBody()
                    .jsonPath("$.status").isEqualTo(409)
                    .jsonPath("$.title").isEqualTo("Lock busy")
                    .jsonPath("$.type").isEqualTo("https://fenced.dev/problems/lock-busy")
                    .jsonPath("$.lockName").isEqualTo("invoice:100020")
                    .jsonPath("$.waitedMs").isEqualTo(200);

            client().post().uri("/invoices/100020/process?maxWaitMs=0").exchange()
                    .expectStatus().isEqualTo(HttpStatus.CONFLICT)
                    .expectHeader().valueEquals("Retry-After", "1")
                    .expectHeader().contentType(MediaType.APPLICATION_PROBLEM_JSON)
                    .expectBody()
                    .jsonPath("$.detail").isEqualTo("Lock invoice:100020 is held by someone else");

            held.release().block(Duration.ofSeconds(10));
        }
        assertThat(stored(100_020).timesProcessed()).isZero();
    }

    @Test
    void writeRejectedByStorageIsAConflictAndTheNextAcquireCatchesUp() {
        freshInvoices(100_030, 100_030);
        ProcessResult first = client().post().uri("/invoices/100030/process").exchange()
                .expectStatus().isOk()
                .expectBody(ProcessResult.class).returnResult().getResponseBody();
        assertThat(first).isNotNull();
        // Storage holds a token Redis has not issued yet (an hour of server-time tokens ahead), as after a
        // failover to a server whose clock was set back.
        long floor = first.token() + 3_600_000_000L;
        db.sql("UPDATE invoices SET fencing_token = :t, fencing_owner = 'lost-to-failover' WHERE id = 100030")
                .bind("t", floor).then().block(Duration.ofSeconds(10));

        client().post().uri("/invoices/100030/process").exchange()
                .expectStatus().isEqualTo(HttpStatus.CONFLICT)
                .expectHeader().contentType(MediaType.APPLICATION_PROBLEM_JSON)
                .expectBody()
                .jsonPath("$.title").isEqualTo("Stale fencing token")
                .jsonPath("$.type").isEqualTo("https://fenced.dev/problems/stale-fencing-token")
                .jsonPath("$.lockName").isEqualTo("invoice:100030")
                .jsonPath("$.presentedToken").value(token -> assertThat(((Number) token).longValue())
                        .isGreaterThan(first.token()).isLessThan(floor))
                .jsonPath("$.storedToken").isEqualTo(floor);
        assertThat(stored(100_030).timesProcessed()).isEqualTo(1);

        // The rejection told the client about the newer token: the next acquire takes a token above it.
        ProcessResult retried = client().post().uri("/invoices/100030/process").exchange()
                .expectStatus().isOk()
                .expectBody(ProcessResult.class).returnResult().getResponseBody();
        assertThat(retried).isNotNull();
        assertThat(retried.token()).isGreaterThan(floor);
        assertThat(stored(100_030).timesProcessed()).isEqualTo(2);
    }

    @Test
    void leaseLostDuringTheWorkIsServiceUnavailable() {
        freshInvoices(100_040, 100_040);
        RedisClient redis = RedisClient.create(RedisServerExtension.server().uri());
        try (StatefulRedisConnection<String, String> connection = redis.connect()) {
            // A lease of 9 s is renewed every 3 s (a shorter one could not fit a renewal and the 5 s command
            // timeout); the work takes longer than one renewal period.
            CompletableFuture<WebClientResponseException> answer = webClient().post()
                    .uri("/invoices/100040/process?leaseMs=9000&workMs=20000")
                    .retrieve().bodyToMono(String.class)
                    .then(reactor.core.publisher.Mono.<WebClientResponseException>error(
                            new AssertionError("the request succeeded")))
                    .onErrorResume(WebClientResponseException.class, reactor.core.publisher.Mono::just)
                    .toFuture();
            // The lock key's layout is documented: <prefix>{<name>}. Deleting it is what an operator's FLUSHALL or
            // a failover that lost the key does; the next renewal finds the lease gone.
            String key = fencedProperties.keyPrefix() + "{invoice:100040}";
            await().atMost(Duration.ofSeconds(30)).until(() -> answer.isDone() || connection.sync().exists(key) == 1);
            assertThat(answer).as("the request ended before it held the lock").isNotDone();
            connection.sync().del(key);

            WebClientResponseException failure = answer.join();
            assertThat(failure.getStatusCode()).isEqualTo(HttpStatus.SERVICE_UNAVAILABLE);
            assertThat(failure.getHeaders().getContentType()).isEqualTo(MediaType.APPLICATION_PROBLEM_JSON);
            assertThat(failure.getResponseBodyAsString())
                    .contains("\"title\":\"Lease lost\"")
                    .contains("\"reason\":\"NOT_HELD\"")
                    .contains("\"lockName\":\"invoice:100040\"");
        } finally {
            redis.shutdown();
        }
        assertThat(stored(100_040).timesProcessed()).isZero();
    }

    @Test
    void badInputIsABadRequest() {
        client().get().uri("/invoices/abc").exchange()
                .expectStatus().isBadRequest()
                .expectHeader().contentType(MediaType.APPLICATION_PROBLEM_JSON)
                .expectBody().jsonPath("$.status").isEqualTo(400);
        client().post().uri("/invoices/0/process").exchange()
                .expectStatus().isBadRequest()
                .expectHeader().contentType(MediaType.APPLICATION_PROBLEM_JSON)
                .expectBody().jsonPath("$.detail").isEqualTo("An invoice id is a positive number, not 0");
        client().post().uri("/invoices/1/process?leaseMs=5").exchange()
                .expectStatus().isBadRequest()
                .expectHeader().contentType(MediaType.APPLICATION_PROBLEM_JSON);
        client().post().uri("/invoices/1/process?maxWaitMs=-5").exchange()
                .expectStatus().isBadRequest()
                .expectHeader().contentType(MediaType.APPLICATION_PROBLEM_JSON);
        client().post().uri("/invoices/settle").contentType(MediaType.APPLICATION_JSON).bodyValue("{\"from\": 9, \"to\": 3}")
                .exchange()
                .expectStatus().isBadRequest()
                .expectHeader().contentType(MediaType.APPLICATION_PROBLEM_JSON)
                .expectBody().jsonPath("$.detail")
                .isEqualTo("from..to must be ascending and span at most 10000 ids");
        client().post().uri("/invoices/settle").contentType(MediaType.APPLICATION_JSON).bodyValue("{not json")
                .exchange()
                .expectStatus().isBadRequest()
                .expectHeader().contentType(MediaType.APPLICATION_PROBLEM_JSON);
    }

    @Test
    void unknownInvoiceIsNotFound() {
        db.sql("DELETE FROM invoices WHERE id = 100050").then().block(Duration.ofSeconds(10));
        client().get().uri("/invoices/100050").exchange()
                .expectStatus().isNotFound()
                .expectHeader().contentType(MediaType.APPLICATION_PROBLEM_JSON)
                .expectBody().jsonPath("$.invoiceId").isEqualTo(100050);
        client().post().uri("/invoices/100050/process").exchange()
                .expectStatus().isNotFound()
                .expectHeader().contentType(MediaType.APPLICATION_PROBLEM_JSON);
    }

    private FencedLockClient otherClient() {
        return FencedLockClient.builder()
                .redisUri(RedisServerExtension.server().uri())
                .keyPrefix(fencedProperties.keyPrefix())
                .build();
    }

    @Test
    void lockMetricsAreVisibleThroughActuator() {
        freshInvoices(100_049, 100_049);
        client().post().uri("/invoices/100049/process").exchange().expectStatus().isOk();
        client().get().uri("/actuator/metrics/fenced.lock.acquire?tag=outcome:acquired&tag=lock:invoice")
                .exchange()
                .expectStatus().isOk()
                .expectBody()
                .jsonPath("$.name").isEqualTo("fenced.lock.acquire")
                .jsonPath("$.measurements[?(@.statistic == 'COUNT')].value").value(count ->
                        org.assertj.core.api.Assertions.assertThat(count.toString()).doesNotContain("[0.0]"));
    }
}
