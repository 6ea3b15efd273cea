package dev.fenced.demo;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Opens the scenario page in headless Chromium (Debian's {@code chromium} package, driven from its command line:
 * nothing else is needed), which presses the run button ({@code ?autorun=1}), waits for the rendered timeline, and
 * saves a screenshot as {@code target/scenario-page.png}.
 */
final class ScenarioPageIT extends DemoTestSupport {

    private static final Path TARGET = Paths.get("target");

    @Test
    void pageRunsTheScenarioAndDrawsTheRejection() throws Exception {
        Path chromium = chromium();
        Path screenshot = TARGET.resolve("scenario-page.png").toAbsolutePath();
        Files.deleteIfExists(screenshot);

        run(chromium, "--screenshot=" + screenshot, "--window-size=1400,1100");
        assertThat(screenshot).exists();
        byte[] png = Files.readAllBytes(screenshot);
        assertThat(png.length).isGreaterThan(10_000);
        assertThat(new String(png, 1, 3, StandardCharsets.US_ASCII)).isEqualTo("PNG");

        String dom = run(chromium, "--dump-dom", "--window-size=1400,1100");
        assertThat(dom).contains("<body data-state=\"done\">");
        assertThat(dom).containsPattern("Worker A \\(token \\d+\\) was rejected by the database; worker B's write "
                + "\\(token \\d+\\) was kept\\.");
        for (String lane : List.of("lock-service", "worker-a", "worker-b", "database")) {
            assertThat(dom).contains("data-lane=\"" + lane + "\"");
        }
        assertThat(dom).contains("class=\"event rejected\" data-kind=\"rejected\"");
    }

    private String run(Path chromium, String... mode) throws IOException, InterruptedException {
        Path profile = Files.createTempDirectory(TARGET.toAbsolutePath(), "chromium-profile");
        Path output = Files.createTempFile(TARGET.toAbsolutePath(), "chromium", ".out");
        List<String> command = new ArrayList<>(List.of(chromium.toString(), "--headless", "--no-sandbox",
                "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=" + profile,
                // Virtual time waits for the page's network requests; the budget bounds the rest.
                "--virtual-time-budget=30000"));
        command.addAll(List.of(mode));
        command.add(baseUrl() + "/?autorun=1");
        Process process = new ProcessBuilder(command)
                .redirectOutput(output.toFile())
                .redirectError(ProcessBuilder.Redirect.DISCARD)
                .start();
        if (!process.waitFor(120, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            fail("Chromium did not finish within 120 s: " + command);
        }
        assertThat(process.exitValue()).as("exit status of " + command).isZero();
        return Files.readString(output);
    }

    /** Chromium from FENCED_CHROMIUM, /usr/bin/chromium or the PATH; a missing browser fails the test. */
    private static Path chromium() {
        List<Path> candidates = new ArrayList<>();
        String configured = System.getenv("FENCED_CHROMIUM");
        if (configured != null && !configured.isBlank()) {
            candidates.add(Paths.get(configured));
        }
        candidates.add(Paths.get("/usr/bin/chromium"));
        for (String directory : System.getenv().getOrDefault("PATH", "").split(java.io.File.pathSeparator)) {
            if (!directory.isEmpty()) {
                candidates.add(Paths.get(directory, "chromium"));
            }
        }
        return candidates.stream().filter(Files::isExecutable).findFirst().orElseThrow(() -> new AssertionError(
                "ScenarioPageIT needs a headless Chromium and found none (looked at FENCED_CHROMIUM, /usr/bin/chromium "
                        + "and chromium on the PATH). Install Debian's chromium package: apt-get install -y chromium"));
    }
}
