package dev.fenced.demo;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * The demo's entry point. Run it with {@code ./mvnw -B -pl demo-webflux -am spring-boot:run}; with no Redis or
 * PostgreSQL configured it starts embedded ones ({@link EmbeddedServicesInitializer}).
 */
@SpringBootApplication
public class FencedDemoApplication {

    /**
     * Starts the application.
     *
     * @param args Spring Boot command-line arguments, such as {@code --server.port=8081}
     */
    public static void main(String[] args) {
        SpringApplication.run(FencedDemoApplication.class, args);
    }
}
