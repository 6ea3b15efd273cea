package dev.fenced.demo;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.htmlunit.BrowserVersion;
import org.htmlunit.WebClient;
import org.htmlunit.html.HtmlPage;
import org.jspecify.annotations.Nullable;

/**
 * A browser for the page test: headless Chromium (Debian's {@code chromium} package, driven from its command line)
 * where one is installed, as on CI; else HtmlUnit, a browser engine in the JDK that runs the page's script, so that
 * the test passes on a machine with only a JDK. Either way the page's DOM, after its script ran, comes back as an
 * HtmlUnit page to query; only Chromium also takes a screenshot.
 */
abstract class PageBrowser implements AutoCloseable {

    /** How long a page may take to run its script; a bound, not an expectation. */
    static final int BUDGET_MILLIS = 60_000;

    final WebClient client = new WebClient(BrowserVersion.CHROME);

    /**
     * Chromium from {@code FENCED_CHROMIUM} (which must then be executable), {@code /usr/bin/chromium} or the
     * {@code PATH}; else HtmlUnit.
     */
    static PageBrowser find() {
        return chromium().<PageBrowser>map(Chromium::new).orElseGet(HtmlUnit::new);
    }

    /** Which engine this is, for messages. */
    abstract String name();

    /**
     * Opens {@code url}, waits until the page's body leaves {@code data-state="running"} and, when the address asks
     * the page to play a story ({@code ?play=...}), {@code data-play="running"}, and returns the DOM. A page that
     * plays a story closes its live streams when it is over, so that a one-shot browser can dump it.
     */
    abstract HtmlPage open(String url, Path workDirectory) throws IOException, InterruptedException;

    /** Saves a screenshot of {@code url} as {@code png}; empty if this engine cannot take one. */
    abstract Optional<Path> screenshot(String url, Path png, Path workDirectory) throws IOException, InterruptedException;

    @Override
    public void close() {
        client.close();
    }

    private static Optional<Path> chromium() {
        String configured = System.getenv("FENCED_CHROMIUM");
        if (configured != null && !configured.isBlank()) {
            Path path = Paths.get(configured);
            if (!Files.isExecutable(path)) {
                throw new AssertionError("FENCED_CHROMIUM is " + configured + ", which is not an executable file");
            }
            return Optional.of(path);
        }
        List<Path> candidates = new ArrayList<>(List.of(Paths.get("/usr/bin/chromium")));
        for (String directory : System.getenv().getOrDefault("PATH", "").split(java.io.File.pathSeparator)) {
            if (!directory.isEmpty()) {
                candidates.add(Paths.get(directory, "chromium"));
            }
        }
        return candidates.stream().filter(Files::isExecutable).findFirst();
    }

    /** The JDK-only engine: runs the page and its script inside this JVM. */
    private static final class HtmlUnit extends PageBrowser {

        HtmlUnit() {
            client.getOptions().setThrowExceptionOnScriptError(true);
            client.getOptions().setThrowExceptionOnFailingStatusCode(true);
            client.getOptions().setTimeout(BUDGET_MILLIS);
            // One connection per request. With HtmlUnit's pooled keep-alive connections, a request sent on a reused
            // connection now and then got no answer: the demo's server never saw it (its request log had no such
            // request), and the page's script, which HtmlUnit runs one request at a time, waited on it until the
            // budget ran out (LivePanelsPageIT failed so 8 times in about 35 plays after a job play; 0 in 14 since).
            client.addRequestHeader("Connection", "close");
        }

        @Override
        String name() {
            return "HtmlUnit";
        }

        @Override
        HtmlPage open(String url, Path workDirectory) throws IOException {
            HtmlPage page = client.getPage(url);
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(BUDGET_MILLIS);
            while (state(page, "data-state") == null || "running".equals(state(page, "data-state"))
                    || "running".equals(state(page, "data-play"))) {
                if (System.nanoTime() - deadline > 0) {
                    fail("The page's script did not finish within " + BUDGET_MILLIS + " ms in HtmlUnit: "
                            + page.asXml());
                }
                client.waitForBackgroundJavaScript(200);
            }
            return page;
        }

        private static @Nullable String state(HtmlPage page, String attribute) {
            if (page.getBody() == null || !page.getBody().hasAttribute(attribute)) {
                return null;
            }
            return page.getBody().getAttribute(attribute);
        }

        @Override
        Optional<Path> screenshot(String url, Path png, Path workDirectory) {
            return Optional.empty();
        }
    }

    /** Headless Chromium run once per question; its dumped DOM is parsed by HtmlUnit with scripts off. */
    private static final class Chromium extends PageBrowser {

        private final Path executable;

        Chromium(Path executable) {
            this.executable = executable;
            client.getOptions().setJavaScriptEnabled(false);
        }

        @Override
        String name() {
            return "Chromium (" + executable + ")";
        }

        @Override
        HtmlPage open(String url, Path workDirectory) throws IOException, InterruptedException {
            return client.loadHtmlCodeIntoCurrentWindow(run(url, workDirectory, "--dump-dom"));
        }

        @Override
        Optional<Path> screenshot(String url, Path png, Path workDirectory) throws IOException, InterruptedException {
            run(url, workDirectory, "--screenshot=" + png.toAbsolutePath());
            return Optional.of(png);
        }

        private String run(String url, Path workDirectory, String mode) throws IOException, InterruptedException {
            Path profile = Files.createTempDirectory(workDirectory.toAbsolutePath(), "chromium-profile");
            Path output = Files.createTempFile(workDirectory.toAbsolutePath(), "chromium", ".out");
            List<String> command = new ArrayList<>(List.of(executable.toString(), "--headless", "--no-sandbox",
                    "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=" + profile,
                    "--window-size=1400,1000",
                    // Virtual time waits for the page's network requests; the budget bounds the rest.
                    "--virtual-time-budget=" + BUDGET_MILLIS / 2, mode, url));
            Process process = new ProcessBuilder(command)
                    .redirectOutput(output.toFile())
                    .redirectError(ProcessBuilder.Redirect.DISCARD)
                    .start();
            if (!process.waitFor(2L * BUDGET_MILLIS, TimeUnit.MILLISECONDS)) {
                process.destroyForcibly();
                fail("Chromium did not finish within " + 2 * BUDGET_MILLIS + " ms: " + command);
            }
            assertThat(process.exitValue()).as("exit status of " + command).isZero();
            return Files.readString(output);
        }
    }
}
