package dev.fenced.lock.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class NamePatternTest {

    @Test
    void theStarMatchesAnyRunAndEverythingElseItself() {
        NamePattern invoices = NamePattern.of("invoice:*");
        assertThat(invoices.matches("invoice:42")).isTrue();
        assertThat(invoices.matches("invoice:")).isTrue();
        assertThat(invoices.matches("invoices:42")).isFalse();
        NamePattern literal = NamePattern.of("a?b[c]%_\\.");
        assertThat(literal.matches("a?b[c]%_\\.")).isTrue();
        assertThat(literal.matches("axb[c]%_\\.")).isFalse();
        assertThat(NamePattern.of("*:*").matches("x:y")).isTrue();
        assertThat(NamePattern.of("*:*").matches("xy")).isFalse();
    }

    @Test
    void scanMatchEscapesTheGlobCharactersOfThePrefixAndTheLiteralsAndStaysInsideTheHashTag() {
        assertThat(NamePattern.of("invoice:*").scanMatch("fenced:")).isEqualTo("fenced:{invoice:*}");
        assertThat(NamePattern.of("a?[b]\\*").scanMatch("p*[x]?\\")).isEqualTo("p\\*\\[x\\]\\?\\\\{a\\?\\[b\\]\\\\*}");
    }

    @Test
    void likeEscapesPercentUnderscoreAndBackslash() {
        assertThat(NamePattern.of("job_%\\*").like("f_x%:")).isEqualTo("f\\_x\\%:{job\\_\\%\\\\%}");
        assertThat(NamePattern.of("*").like("")).isEqualTo("{%}");
    }

    @Test
    void nameInAcceptsOnlyMatchingLockKeysUnderThePrefix() {
        NamePattern all = NamePattern.of("*");
        assertThat(all.nameIn("fenced:", "fenced:{a}")).isEqualTo("a");
        assertThat(all.nameIn("fenced:", "fenced:{a}:fence")).isNull();
        assertThat(all.nameIn("fenced:", "fenced:x{a}")).isNull();
        assertThat(all.nameIn("fenced:", "other:{a}")).isNull();
        assertThat(all.nameIn("fenced:", "fenced:{a}x{b}")).isNull();
        assertThat(all.nameIn("fenced:", "fenced:{}")).isNull();
        assertThat(NamePattern.of("b*").nameIn("fenced:", "fenced:{a}")).isNull();
    }

    @Test
    void badPatternsAreRefusedWithExactMessages() {
        assertThat(NamePattern.problemWith(null)).isEqualTo("Lock name pattern must not be null");
        assertThat(NamePattern.problemWith("")).isEqualTo("Lock name pattern must not be empty (use \"*\" for every lock)");
        assertThat(NamePattern.problemWith("a}*{b")).isEqualTo("Lock name pattern must not contain braces, was 'a}*{b'");
        assertThat(NamePattern.problemWith("a\nb")).isEqualTo("Lock name pattern must not contain control characters, was 'a?b'");
        assertThat(NamePattern.problemWith("x".repeat(1025)))
                .isEqualTo("Lock name pattern must be at most 1024 characters, was 1025");
        assertThatThrownBy(() -> NamePattern.of("{x}")).isInstanceOf(IllegalArgumentException.class);
    }
}
