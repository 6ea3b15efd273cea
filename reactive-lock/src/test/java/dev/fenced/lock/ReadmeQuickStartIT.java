package dev.fenced.lock;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.testservices.RedisServer;
import dev.fenced.testservices.RedisServerExtension;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The README's quick start is {@code src/test/java/QuickStart.java} word for word, so it compiles with
 * the build; this test checks that the two agree and runs it against Redis.
 */
@ExtendWith(RedisServerExtension.class)
class ReadmeQuickStartIT {

    private static String quickStartInReadme() throws IOException {
        String readme = Files.readString(Path.of("..", "README.md"));
        int section = readme.indexOf("## Quick start");
        assertThat(section).as("README has a quick start").isNotNegative();
        int start = readme.indexOf("```java\n", section);
        assertThat(start).as("quick start has a java block").isNotNegative();
        start += "```java\n".length();
        int end = readme.indexOf("```", start);
        return readme.substring(start, end).strip();
    }

    @Test
    void readmeQuickStartIsTheCompiledExample() throws IOException {
        String source = Files.readString(Path.of("src", "test", "java", "QuickStart.java")).strip();
        assertThat(quickStartInReadme()).isEqualTo(source);
    }

    @Test
    void quickStartRunsAgainstRedis(RedisServer redis) throws Exception {
        PrintStream original = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            Class.forName("QuickStart").getMethod("main", String[].class).invoke(null, (Object) new String[] {redis.uri()});
        } finally {
            System.setOut(original);
        }
        assertThat(captured.toString(StandardCharsets.UTF_8)).containsPattern("invoice 42 settled with fencing token \\d+");
    }
}
