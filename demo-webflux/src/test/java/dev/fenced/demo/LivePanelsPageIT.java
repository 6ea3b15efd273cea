package dev.fenced.demo;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import org.htmlunit.html.DomElement;
import org.htmlunit.html.DomNode;
import org.htmlunit.html.HtmlPage;
import org.junit.jupiter.api.Test;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The page's live panels in a real browser engine ({@link PageBrowser}), driven through the page's own buttons:
 * with {@code ?play=break} the page runs the stuck-holder scenario and clicks "Break this lock" on worker A's lock
 * in the locks panel; with {@code ?play=job} it clicks "Stall the running instance" in the job panel. The test waits
 * for the DOM the story ends with and checks it.
 */
final class LivePanelsPageIT extends DemoTestSupport {

    private static final Logger LOG = LoggerFactory.getLogger(LivePanelsPageIT.class);
    private static final Path TARGET = Paths.get("target");

    @Test
    void breakingTheStuckWorkersLockShowsItsLateWriteRefused() throws Exception {
        try (PageBrowser browser = PageBrowser.find()) {
            LOG.info("LivePanelsPageIT drives {}", browser.name());
            HtmlPage page = browser.open(baseUrl() + "/?play=break", TARGET);

            assertThat(page.getBody().getAttribute("data-play")).as(page.asXml()).isEqualTo("done");
            DomElement result = page.getElementById("break-result");
            assertThat(result.getAttribute("data-outcome")).as(page.asXml()).isEqualTo("RELEASED");
            assertThat(result.getTextContent()).contains("held by " + ScenarioService.WORKER_A_LABEL);

            DomElement stuck = page.querySelector(".arm[data-arm=\"stuck\"]", page);
            assertThat(stuck.getAttribute("data-state")).isEqualTo("done");
            assertThat(text(stuck, ".verdict")).matches("Worker A \\(token \\d+\\) was rejected by the database; "
                    + "worker B's write \\(token \\d+\\) was kept\\.");
            assertThat(text(stuck, ".status")).startsWith("A's lock was broken by hand; B got token ");
            assertThat(text(stuck, ".row")).startsWith("The invoice row at the end: written by worker-b, ");
            // Lanes are drawn one under the other, each in time order.
            assertThat(kinds(stuck, ".lane[data-lane=\"lock-service\"] .event"))
                    .containsExactly("granted", "force-released", "granted");
            assertThat(kinds(stuck, ".lane[data-lane=\"worker-a\"] .event")).contains("paused", "rejected");
            assertThat(kinds(stuck, ".lane[data-lane=\"database\"] .event.rejected")).containsExactly("rejected");
            assertThat(page.getElementById("locks-panel").getAttribute("data-state")).isEqualTo("live");
        }
    }

    @Test
    void stallingTheRunningInstanceShowsTheOtherRunTheNextTickAndTheLateWriteRefused() throws Exception {
        try (PageBrowser browser = PageBrowser.find()) {
            HtmlPage page = browser.open(baseUrl() + "/?play=job", TARGET);

            assertThat(page.getBody().getAttribute("data-play")).as(page.asXml()).isEqualTo("done");
            DomElement panel = page.getElementById("job-panel");
            assertThat(panel.getAttribute("data-state")).isEqualTo("live");
            List<DomElement> rows = panel.querySelectorAll("tbody tr", panel).stream().map(n -> (DomElement) n)
                    .sorted(java.util.Comparator.comparingLong(LivePanelsPageIT::seq)).toList();
            DomElement refused = rows.stream().filter(r -> r.getAttribute("data-kind").equals("write-refused"))
                    .reduce((a, b) -> b).orElseThrow(() -> new AssertionError(panel.asXml()));
            String stalled = refused.getAttribute("data-instance");
            long refusedSeq = seq(refused);
            DomElement paused = rows.stream().filter(r -> r.getAttribute("data-kind").equals("paused")
                    && seq(r) < refusedSeq).reduce((a, b) -> b).orElseThrow();
            assertThat(paused.getAttribute("data-instance")).isEqualTo(stalled);
            assertThat(rows).filteredOn(r -> seq(r) > seq(paused) && seq(r) < refusedSeq)
                    .extracting(r -> r.getAttribute("data-instance") + " " + r.getAttribute("data-kind"))
                    .contains(stalled + " cut-off", stalled + " resumed")
                    .anyMatch(s -> s.endsWith(" write-accepted") && !s.startsWith(stalled));
            assertThat(refused.getTextContent()).contains("write REFUSED").contains("is older than the stored token");
        }
    }

    private static long seq(DomElement row) {
        return Long.parseLong(row.getAttribute("data-seq"));
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
