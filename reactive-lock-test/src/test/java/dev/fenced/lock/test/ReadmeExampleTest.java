package dev.fenced.lock.test;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The README's testing example is these test sources word for word, so it compiles and runs with the build. */
class ReadmeExampleTest {

    private static List<String> javaBlocksOfSection(String heading) throws IOException {
        String readme = Files.readString(Path.of("..", "README.md"));
        int start = readme.indexOf(heading);
        assertThat(start).as("README has the section " + heading).isNotNegative();
        int end = readme.indexOf("\n## ", start + heading.length());
        String section = readme.substring(start, end < 0 ? readme.length() : end);
        List<String> blocks = new ArrayList<>();
        int from = 0;
        while ((from = section.indexOf("```java\n", from)) >= 0) {
            int close = section.indexOf("```", from + 8);
            blocks.add(section.substring(from + 8, close).strip());
            from = close + 3;
        }
        return blocks;
    }

    private static String source(String file) throws IOException {
        return Files.readString(Path.of("src", "test", "java", "dev", "fenced", "lock", "test", file)).strip();
    }

    @Test
    void readmeShowsTheServiceAndItsTestAsCompiled() throws IOException {
        assertThat(javaBlocksOfSection("## Testing your code")).containsExactly(
                source("InvoiceService.java"), source("InvoiceServiceTest.java"));
    }
}
