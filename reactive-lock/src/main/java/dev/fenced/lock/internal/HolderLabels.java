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
        return "";
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
        String clean = label.toString().replaceAll("\\p{Cntrl}", "?");
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
