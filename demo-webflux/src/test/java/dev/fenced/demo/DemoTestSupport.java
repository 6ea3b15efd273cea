package dev.fenced.demo;

import dev.fenced.spring.FencedProperties;

import dev.fenced.testservices.PostgresServerExtension;
import dev.fenced.testservices.RedisServerExtension;
import java.time.Duration;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.r2dbc.core.DatabaseClient;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.test.web.reactive.server.WebTestClient;
import org.springframework.web.reactive.function.client.WebClient;

/**
 * The running application on a random port, against the Redis and PostgreSQL of the test-services extensions
 * (from the environment, Testcontainers, or embedded). Every subclass shares one application context.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
abstract class DemoTestSupport {

    @LocalServerPort
    int port;

    @Autowired
    DatabaseClient db;

    @Autowired
    FencedProperties fencedProperties;

    @DynamicPropertySource
    static void services(DynamicPropertyRegistry registry) {
        registry.add("fenced.redis-uri", () -> RedisServerExtension.server().uri());
        registry.add("spring.r2dbc.url", () -> PostgresServerExtension.server().r2dbcUrl());
    }

    String baseUrl() {
        return "http://127.0.0.1:" + port;
    }

    WebTestClient client() {
        return WebTestClient.bindToServer().baseUrl(baseUrl()).responseTimeout(Duration.ofSeconds(60)).build();
    }

    WebClient webClient() {
        return WebClient.builder().baseUrl(baseUrl()).build();
    }

    /** Replaces invoices {@code from..to} by fresh open ones of amount 100, never written under a lease. */
    void freshInvoices(long from, long to) {
        db.sql("DELETE FROM invoices WHERE id BETWEEN :from AND :to").bind("from", from).bind("to", to)
                .then().block(Duration.ofSeconds(30));
        db.sql("INSERT INTO invoices (id, customer, status, amount) SELECT n, 'test', 'OPEN', 100 "
                        + "FROM generate_series(CAST(:from AS bigint), CAST(:to AS bigint)) n")
                .bind("from", from).bind("to", to)
                .then().block(Duration.ofSeconds(30));
    }

    Invoice stored(long id) {
        return db.sql("SELECT * FROM invoices WHERE id = :id").bind("id", id).map(InvoiceRepository::invoice).one()
                .blockOptional(Duration.ofSeconds(30))
                .orElseThrow(() -> new AssertionError("no invoice " + id));
    }
}
