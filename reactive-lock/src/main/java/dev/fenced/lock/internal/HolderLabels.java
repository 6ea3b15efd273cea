package dev.fenced.lock.internal;

import org.jspecify.annotations.Nullable;

/**
 * Holder labels: the description of the acquiring instance that a client stores with each grant, so that the
 * fleet view of every instance can say who holds a lock. Never the owner id (a capability). One place for their
 * validation and their default, which the builder and the starter share.
 *
 * <p>Thread-safe.
 */
public final class HolderLabels {

    /** The longest accepted label, in characters. */
    public static final int MAX_LENGTH = 200;

    private static volatile @Nullable String host;

    private HolderLabels() {
    }

    /**
     * Describes what is wrong with a label.
     *
     * @param label the candidate, possibly {@code null}
     * @return the empty string if it is valid, else the error message
     */
    public static String problemWith(@Nullable String label) {
        if (label == null) {
            return "holderLabel must not be null";
        }
        if (label.isBlank()) {
            return "holderLabel must not be blank";
        }
        if (label.length() > MAX_LENGTH) {
            return "holderLabel must be at most " + MAX_LENGTH + " characters, was " + label.length();
        }
        for (int i = 0; i < label.length(); i++) {
            if (Character.isISOControl(label.charAt(i))) {
                return "holderLabel must not contain control characters, was '" + label.replaceAll("\\p{Cntrl}", "?") + "'";
            }
        }
        int unpaired = KeyLayout.unpairedSurrogate(label);
        if (unpaired >= 0) {
            return "holderLabel must be valid Unicode: it has an unpaired surrogate at index " + unpaired;
        }
        int invisible = invisible(label);
        if (invisible >= 0) {
            return "holderLabel must not contain Unicode format or line/paragraph separator characters, found "
                    + codePoint(invisible) + " in '" + masked(label) + "'";
        }
        return "";
    }

    /**
     * The first code point of {@code text} that is a Unicode format character (bidi overrides such as U+202E,
     * zero-width characters) or a line or paragraph separator (U+2028, U+2029), which log viewers may show as
     * line breaks or that reorder what is shown; -1 when there is none. Control characters are checked apart.
     *
     * @param text the text
     * @return the code point, or -1
     */
    public static int invisible(String text) {
        return text.codePoints().filter(HolderLabels::isInvisible).findFirst().orElse(-1);
    }

    /**
     * {@code text} with control characters, format characters and line or paragraph separators replaced by
     * {@code ?}, fit for an error message or the log.
     *
     * @param text the text
     * @return the masked text
     */
    public static String masked(String text) {
        StringBuilder out = new StringBuilder(text.length());
        text.codePoints().forEach(c -> {
            if (Character.isISOControl(c) || isInvisible(c)) {
                out.append('?');
            } else {
                out.appendCodePoint(c);
            }
        });
        return out.toString();
    }

    /**
     * A code point as {@code U+XXXX}.
     *
     * @param codePoint the code point
     * @return its notation
     */
    public static String codePoint(int codePoint) {
        return String.format("U+%04X", codePoint);
    }

    private static boolean isInvisible(int c) {
        int type = Character.getType(c);
        return type == Character.FORMAT || type == Character.LINE_SEPARATOR || type == Character.PARAGRAPH_SEPARATOR;
    }

    /**
     * The default label: {@code application@host (pid N)}, or {@code host (pid N)} without an application name;
     * control characters replaced by {@code ?} and cut to {@link #MAX_LENGTH}, so that it is always valid. The
     * host is the {@code HOSTNAME} (or {@code COMPUTERNAME}) environment variable, else the local host name
     * (looked up once per JVM: call this at build time, never on an event loop).
     *
     * @param applicationName the application's name, or {@code null}
     * @return the label
     */
    public static String defaultLabel(@Nullable String applicationName) {
        StringBuilder label = new StringBuilder();
        if (applicationName != null && !applicationName.isBlank()) {
            label.append(applicationName.strip()).append('@');
        }
        label.append(host()).append(" (pid ").append(ProcessHandle.current().pid()).append(')');
        String clean = masked(label.toString());
        return clean.length() > MAX_LENGTH ? clean.substring(0, MAX_LENGTH) : clean;
    }

    private static String host() {
        String known = host;
        if (known != null) {
            return known;
        }
        String found = System.getenv("HOSTNAME");
        if (found == null || found.isBlank()) {
            found = System.getenv("COMPUTERNAME");
        }
        if (found == null || found.isBlank()) {
            try {
                found = java.net.InetAddress.getLocalHost().getHostName();
            } catch (java.io.IOException | RuntimeException e) {
                found = "unknown-host";
            }
        }
        host = found;
        return found;
    }
}
