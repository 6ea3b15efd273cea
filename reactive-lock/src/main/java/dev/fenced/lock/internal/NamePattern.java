package dev.fenced.lock.internal;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * A pattern of lock names for the fleet view: {@code *} stands for any run of characters (none included); every
 * other character stands for itself, {@code ?}, {@code [}, {@code ]}, {@code \}, {@code %} and {@code _} included.
 * A pattern without {@code *} matches one name. Each store turns it into its own syntax with everything but the
 * wildcards escaped ({@link #scanMatch} for Redis {@code SCAN MATCH}, {@link #like} for SQL {@code LIKE}), inside
 * the client's key prefix, so no pattern reaches a key outside it; and every name a store finds is checked again
 * with {@link #matches}, so nothing the server's matching lets through by mistake is shown.
 *
 * <p>Immutable and thread-safe.
 */
public final class NamePattern {

    /** The longest accepted pattern, in characters: as long as a name. */
    public static final int MAX_LENGTH = KeyLayout.MAX_NAME_LENGTH;

    private final String pattern;
    private final List<String> literals;
    private final Pattern regex;

    private NamePattern(String pattern) {
        this.pattern = pattern;
        List<String> parts = new ArrayList<>();
        int from = 0;
        for (int star = pattern.indexOf('*'); star >= 0; star = pattern.indexOf('*', from)) {
            parts.add(pattern.substring(from, star));
            from = star + 1;
        }
        parts.add(pattern.substring(from));
        this.literals = List.copyOf(parts);
        StringBuilder r = new StringBuilder();
        for (int i = 0; i < literals.size(); i++) {
            if (i > 0) {
                r.append(".*");
            }
            if (!literals.get(i).isEmpty()) {
                r.append(Pattern.quote(literals.get(i)));
            }
        }
        this.regex = Pattern.compile(r.toString(), Pattern.DOTALL);
    }

    /**
     * Describes what is wrong with a pattern.
     *
     * @param pattern the candidate, possibly {@code null}
     * @return the empty string if it is valid, else the error message
     */
    public static String problemWith(@org.jspecify.annotations.Nullable String pattern) {
        if (pattern == null) {
            return "Lock name pattern must not be null";
        }
        if (pattern.isEmpty()) {
            return "Lock name pattern must not be empty (use \"*\" for every lock)";
        }
        if (pattern.length() > MAX_LENGTH) {
            return "Lock name pattern must be at most " + MAX_LENGTH + " characters, was " + pattern.length();
        }
        for (int i = 0; i < pattern.length(); i++) {
            char c = pattern.charAt(i);
            if (Character.isISOControl(c)) {
                return "Lock name pattern must not contain control characters, was '"
                        + pattern.replaceAll("\\p{Cntrl}", "?") + "'";
            }
            if (c == '{' || c == '}') {
                // Names never hold braces (they are the hash tag); one in a pattern could only reach other keys.
                return "Lock name pattern must not contain braces, was '" + pattern + "'";
            }
        }
        int unpaired = KeyLayout.unpairedSurrogate(pattern);
        if (unpaired >= 0) {
            return "Lock name pattern must be valid Unicode: it has an unpaired surrogate at index " + unpaired;
        }
        return "";
    }

    /**
     * A validated pattern.
     *
     * @param pattern the pattern
     * @return the pattern
     * @throws IllegalArgumentException if {@link #problemWith} finds a problem
     */
    public static NamePattern of(String pattern) {
        String problem = problemWith(pattern);
        if (!problem.isEmpty()) {
            throw new IllegalArgumentException(problem);
        }
        return new NamePattern(Objects.requireNonNull(pattern));
    }

    /**
     * Whether a lock name matches.
     *
     * @param name the lock name
     * @return whether it matches
     */
    public boolean matches(String name) {
        return regex.matcher(name).matches();
    }

    /**
     * The {@code SCAN MATCH} pattern of the lock keys under {@code prefix} whose names match: the prefix and the
     * literal parts escaped ({@code * ? [ ] \}), the wildcards as {@code *}, inside the hash tag's braces.
     *
     * @param prefix the key prefix
     * @return the glob
     */
    public String scanMatch(String prefix) {
        StringBuilder glob = new StringBuilder(escapeGlob(prefix)).append('{');
        for (int i = 0; i < literals.size(); i++) {
            if (i > 0) {
                glob.append('*');
            }
            glob.append(escapeGlob(literals.get(i)));
        }
        return glob.append('}').toString();
    }

    /**
     * The SQL {@code LIKE} pattern (with {@code ESCAPE '\'}) of the lock ids under {@code prefix} whose names
     * match: the prefix and the literal parts escaped ({@code % _ \}), the wildcards as {@code %}.
     *
     * @param prefix the key prefix
     * @return the pattern
     */
    public String like(String prefix) {
        StringBuilder like = new StringBuilder(escapeLike(prefix)).append('{');
        for (int i = 0; i < literals.size(); i++) {
            if (i > 0) {
                like.append('%');
            }
            like.append(escapeLike(literals.get(i)));
        }
        return like.append('}').toString();
    }

    /**
     * The lock name inside a lock key or lock id under {@code prefix}, if it is one ({@code prefix{name}} with a
     * valid name) whose name matches.
     *
     * @param prefix the key prefix
     * @param key the key or lock id
     * @return the name, or {@code null} if the key is not a matching lock key
     */
    public @org.jspecify.annotations.Nullable String nameIn(String prefix, String key) {
        if (!key.startsWith(prefix) || key.length() < prefix.length() + 2 || key.charAt(prefix.length()) != '{'
                || key.charAt(key.length() - 1) != '}') {
            return null;
        }
        String name = key.substring(prefix.length() + 1, key.length() - 1);
        return KeyLayout.problemWithName(name).isEmpty() && matches(name) ? name : null;
    }

    static String escapeGlob(String literal) {
        StringBuilder out = new StringBuilder(literal.length());
        for (int i = 0; i < literal.length(); i++) {
            char c = literal.charAt(i);
            if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') {
                out.append('\\');
            }
            out.append(c);
        }
        return out.toString();
    }

    static String escapeLike(String literal) {
        StringBuilder out = new StringBuilder(literal.length());
        for (int i = 0; i < literal.length(); i++) {
            char c = literal.charAt(i);
            if (c == '%' || c == '_' || c == '\\') {
                out.append('\\');
            }
            out.append(c);
        }
        return out.toString();
    }

    @Override
    public String toString() {
        return pattern;
    }
}
