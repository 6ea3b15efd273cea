package dev.fenced.testservices;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Locale;
import org.jspecify.annotations.Nullable;

/**
 * The Redis 7 {@code redis-server} that this module's build unpacks into its jar (from
 * {@code com.github.lansheng228:embedded-redis}, static builds of Redis 7.0), as
 * {@code redis7/redis-server-<os>-<arch>} next to this class, for Linux and macOS on x86-64 and arm64.
 */
final class BundledRedis {

    private BundledRedis() {
    }

    /**
     * Copies the binary for this platform to a new temporary file, executable and deleted at JVM exit.
     *
     * @throws IOException if none is bundled for this platform, or it could not be copied
     */
    static File extract() throws IOException {
        String platform = platform(System.getProperty("os.name", ""), System.getProperty("os.arch", ""));
        if (platform == null) {
            throw new IOException("no Redis 7 binary is bundled for " + System.getProperty("os.name") + " on "
                    + System.getProperty("os.arch"));
        }
        String resource = "redis7/redis-server-" + platform;
        try (InputStream in = BundledRedis.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new IOException("the resource " + resource + " is missing next to " + BundledRedis.class.getName()
                        + " (the build unpacks it)");
            }
            Path directory = Files.createTempDirectory("fenced-redis7-");
            Path file = directory.resolve("redis-server");
            Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
            directory.toFile().deleteOnExit();
            file.toFile().deleteOnExit();
            if (!file.toFile().setExecutable(true, true)) {
                throw new IOException("could not make " + file + " executable");
            }
            return file.toFile();
        }
    }

    /** The {@code <os>-<arch>} suffix of the bundled binary for these system properties, or {@code null} if none. */
    static @Nullable String platform(String osName, String osArch) {
        String os = osName.toLowerCase(Locale.ROOT);
        String arch = switch (osArch.toLowerCase(Locale.ROOT)) {
            case "amd64", "x86_64" -> "amd64";
            case "aarch64", "arm64" -> "arm64";
            default -> null;
        };
        if (arch == null) {
            return null;
        }
        if (os.startsWith("linux")) {
            return "linux-" + arch;
        }
        if (os.startsWith("mac") || os.startsWith("darwin")) {
            return "darwin-" + arch;
        }
        return null;
    }
}
