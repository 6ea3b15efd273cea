package dev.fenced.lock.internal;

import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * Names of the keys and channel of a lock. All of a lock's keys share the cluster hash tag
 * {@code {name}}, so they live in one slot of a Redis Cluster:
 * <ul>
 *   <li>{@code prefix{name}}: the lock, value {@code owner:token}, with the lease's expiry;</li>
 *   <li>{@code prefix{name}:fence}: the token counter, never expiring;</li>
 *   <li>{@code prefix{name}:released}: the pub/sub channel of release notifications;</li>
 *   <li>{@code prefix{name}:holder}: {@code token label}, the holder label written with a grant, never expiring
 *       (shown only while the lock holds that token).</li>
 * </ul>
 *
 * <p>Immutable and thread-safe.
 */
public final class KeyLayout {

    /** The longest accepted lock name, in characters. */
    public static final int MAX_NAME_LENGTH = 1024;

    /** The longest accepted key prefix, in characters. */
    public static final int MAX_PREFIX_LENGTH = 256;

    private final String prefix;

    /**
     * A layout with the given prefix.
     *
     * @param prefix the key prefix, validated by {@link #requireValidPrefix(String)}
     */
    public KeyLayout(String prefix) {
        this.prefix = requireValidPrefix(prefix);
    }

    /**
     * Checks a key prefix.
     *
     * @param prefix the prefix
     * @return the prefix
     * @throws IllegalArgumentException if it is too long or contains braces or control characters
     */
    public static String requireValidPrefix(String prefix) {
        Objects.requireNonNull(prefix, "keyPrefix must not be null");
        if (prefix.length() > MAX_PREFIX_LENGTH) {
            throw new IllegalArgumentException("keyPrefix must be at most " + MAX_PREFIX_LENGTH + " characters, was " + prefix.length());
        }
        for (int i = 0; i < prefix.length(); i++) {
            char c = prefix.charAt(i);
            if (c == '{' || c == '}' || Character.isISOControl(c)) {
                throw new IllegalArgumentException("keyPrefix must not contain braces or control characters (they would break the "
                        + "cluster hash tag), was '" + prefix + "'");
            }
        }
        return prefix;
    }

    /**
     * Describes what is wrong with a lock name.
     *
     * @param name the candidate name, possibly {@code null}
     * @return the empty string if the name is valid, else the error message
     */
    public static String problemWithName(@Nullable String name) {
        if (name == null) {
            return "Lock name must not be null";
        }
        String s = name;
        if (s.isBlank()) {
            return "Lock name must not be blank";
        }
        if (s.length() > MAX_NAME_LENGTH) {
            return "Lock name must be at most " + MAX_NAME_LENGTH + " characters, was " + s.length();
        }
        for (int i = 0; i < s.length(); i++) {
            if (Character.isISOControl(s.charAt(i))) {
                return "Lock name must not contain control characters, was '" + s.replaceAll("\\p{Cntrl}", "?") + "'";
            }
        }
        if (s.indexOf('{') >= 0 || s.indexOf('}') >= 0) {
            // The name becomes the cluster hash tag of the lock's keys; a brace would split them over slots.
            return "Lock name must not contain braces, was '" + s + "'";
        }
        int unpaired = unpairedSurrogate(s);
        if (unpaired >= 0) {
            return "Lock name must be valid Unicode: it has an unpaired surrogate at index " + unpaired
                    + " (such a name has no UTF-8 form: its key would be another name's, invisible to the fleet view)";
        }
        return "";
    }

    /**
     * The index of the first surrogate of {@code text} that is not half of a pair, or -1. A string with one has no
     * UTF-8 form: encoders write a {@code '?'} for it (and Netty's, which Lettuce uses, may drop a byte of the next
     * character), so two such strings can encode to one key.
     *
     * @param text the text
     * @return the index, or -1
     */
    public static int unpairedSurrogate(String text) {
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (Character.isHighSurrogate(c) && i + 1 < text.length() && Character.isLowSurrogate(text.charAt(i + 1))) {
                i++;
            } else if (Character.isSurrogate(c)) {
                return i;
            }
        }
        return -1;
    }

    /**
     * The lock key.
     *
     * @param name the lock name
     * @return the key
     */
    public String lockKey(String name) {
        return prefix + "{" + name + "}";
    }

    /**
     * The token counter key.
     *
     * @param name the lock name
     * @return the key
     */
    public String fenceKey(String name) {
        return lockKey(name) + ":fence";
    }

    /**
     * The holder label key: {@code token label} of the latest grant by a client with a label (the acquire script
     * derives the same name from the lock key).
     *
     * @param name the lock name
     * @return the key
     */
    public String holderKey(String name) {
        return lockKey(name) + ":holder";
    }

    /**
     * The release notification channel.
     *
     * @param name the lock name
     * @return the channel
     */
    public String releaseChannel(String name) {
        return lockKey(name) + ":released";
    }

    /**
     * The prefix.
     *
     * @return the prefix
     */
    public String prefix() {
        return prefix;
    }
}
