package dev.fenced.demo;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.Optional;
import org.htmlunit.html.DomElement;
import org.htmlunit.html.DomNode;
import org.htmlunit.html.HtmlPage;
import org.junit.jupiter.api.Test;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Opens the demo's first screen as a newcomer does, in a real browser engine ({@link PageBrowser}: Chromium where
 * installed, else HtmlUnit), without pressing anything: both timelines must be there with their verdicts. With
 * Chromium it also saves what the newcomer sees as {@code target/scenario-page.png}.
 */
final class ScenarioPageIT extends DemoTestSupport {

    private static final Logger LOG = LoggerFactory.getLogger(ScenarioPageIT.class);
    private static final Path TARGET = Paths.get("target");

    @Test
    void firstScreenShowsTheOverwriteWithoutFencingBesideTheRejectionWithIt() throws Exception {
        try (PageBrowser browser = PageBrowser.find()) {
            LOG.info("ScenarioPageIT drives {}", browser.name());
            // ?play=scenario only closes the page's live streams once the first screen is drawn (see live.js).
            HtmlPage page = browser.open(baseUrl() + "/?play=scenario", TARGET);

            assertThat(page.getBody().getAttribute("data-state")).as(page.asXml()).isEqualTo("done");
            assertThat(page.getBody().getAttribute("data-play")).isEqualTo("done");

            DomElement unfenced = arm(page, "unfenced");
            assertThat(text(unfenced, ".verdict")).isEqualTo("Worker A's late write was accepted and overwrote worker "
                    + "B's: the row ends with A's stale ledger, and B's booking is lost.");
            assertThat(text(unfenced, ".row")).startsWith("The invoice row at the end: written by worker-a, ");
            assertThat(kinds(unfenced, ".event.stale")).containsExactly("accepted");
            assertThat(kinds(unfenced, ".event.rejected")).isEmpty();

            DomElement fenced = arm(page, "fenced");
            assertThat(text(fenced, ".verdict")).matches("Worker A \\(token \\d+\\) was rejected by the database; "
                    + "worker B's write \\(token \\d+\\) was kept\\.");
            assertThat(text(fenced, ".row")).startsWith("The invoice row at the end: written by worker-b, ");
            assertThat(kinds(fenced, ".event.rejected")).contains("rejected");
            assertThat(kinds(fenced, ".event.stale")).isEmpty();

            for (DomElement arm : List.of(unfenced, fenced)) {
                assertThat(arm.querySelectorAll(".lane", arm)).extracting(lane -> ((DomElement) lane).getAttribute("data-lane"))
                        .containsExactly("lock-service", "worker-a", "worker-b", "database");
                assertThat(text(arm, ".verdict")).isNotEmpty();
            }

            Path png = TARGET.resolve("scenario-page.png").toAbsolutePath();
            Files.deleteIfExists(png);
            Optional<Path> screenshot = browser.screenshot(baseUrl() + "/?play=scenario", png, TARGET);
            if (screenshot.isPresent()) {
                byte[] bytes = Files.readAllBytes(png);
                assertThat(bytes.length).isGreaterThan(10_000);
                assertThat(new String(bytes, 1, 3, StandardCharsets.US_ASCII)).isEqualTo("PNG");
            } else {
                LOG.info("{} takes no screenshots; Chromium saves one as {}", browser.name(), png);
            }
        }
    }

    private static DomElement arm(HtmlPage page, String name) {
        DomElement arm = page.querySelector(".arm[data-arm=\"" + name + "\"]", page);
        assertThat(arm).as("section " + name).isNotNull();
        return arm;
    }

    private static String text(DomElement scope, String selector) {
        DomNode node = scope.querySelector(selector, scope);
        assertThat(node).as(selector).isNotNull();
        return node.getTextContent().strip();
    }

    private static List<String> kinds(DomElement scope, String selector) {
        return scope.querySelectorAll(selector, scope).stream()
                .map(node -> ((DomElement) node).getAttribute("data-kind")).toList();
    }
}
