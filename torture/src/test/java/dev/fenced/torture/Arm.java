package dev.fenced.torture;

import dev.fenced.lock.TokenScheme;

/** What locks and guards the workload's writes: the library, or a control arm that the checker must flag. */
enum Arm {

    /**
     * Fenced leases with the default tokens ({@link TokenScheme#SERVER_TIME}), reads claimed and writes guarded by
     * {@code FencedWrite} (the library's default rule).
     */
    FENCED("fenced", false),

    /**
     * As {@link #FENCED}, with consecutive counter tokens ({@link TokenScheme#COUNTER}), the option the library
     * keeps: a failover that lost writes re-issues a token to a second holder, and the owner check of the storage
     * rule must refuse it.
     */
    FENCED_COUNTER("fenced, counter tokens", false),

    /**
     * Control: as {@link #FENCED}, but with consecutive counter tokens ({@link TokenScheme#COUNTER}). When Redis's
     * counter falls back by several grants, a newer holder gets a token below a stalled holder's, and storage
     * accepts the stalled holder's write after the newer holder's.
     */
    COUNTER_TOKENS("control: counter-only tokens", true),

    /**
     * Control: Fenced leases with counter tokens, but storage accepts a token iff {@code stored <= presented},
     * with no owner check. A token re-issued after a failover then lets two holders write. (Server-time tokens are
     * not re-issued by a failover between servers whose clocks agree, so this control needs counter tokens.)
     */
    TOKEN_ONLY("control: token <= only", true),

    /** Control: a plain TTL lock ({@code SET NX PX}, no renewal, no token checked) and unguarded writes. */
    PLAIN_TTL("control: plain TTL lock", true),

    /**
     * Control of the lock-set workload: Fenced leases (renewed, loss signalled), but the row is read and written with
     * plain SQL, no claim and no token, and nothing is checked before the write: the set in an unfenced row.
     */
    UNFENCED_ROW("control: lease, unfenced row", true),

    /**
     * Control of the lock-set workload: as {@link #UNFENCED_ROW}, but right before its write the holder checks that
     * its lease still exists ({@code lease.isHeld()}) and writes nothing if not. A pause between that check and the
     * write is all it takes.
     */
    LEASE_CHECK("control: lease checked, then an unfenced write", true),

    /**
     * Control of the clock faults: {@link #FENCED} exactly, under the one fault outside what the root README
     * guarantees: the lock server lost its counter and came back with a clock behind the one that issued an earlier
     * grant, by more than the time between the two grants.
     */
    CLOCK_BEHIND("control: counter lost, clock behind", true);

    private final String label;
    private final boolean control;

    Arm(String label, boolean control) {
        this.label = label;
        this.control = control;
    }

    String label() {
        return label;
    }

    /** How this arm's lock clients mint tokens (the plain TTL lock has a grant number of its own). */
    TokenScheme tokenScheme() {
        return switch (this) {
            case FENCED, PLAIN_TTL, UNFENCED_ROW, LEASE_CHECK, CLOCK_BEHIND -> TokenScheme.SERVER_TIME;
            case FENCED_COUNTER, COUNTER_TOKENS, TOKEN_ONLY -> TokenScheme.COUNTER;
        };
    }

    /** Whether storage checks this arm's tokens: its reads are claimed and its writes fenced. */
    boolean fencesStorage() {
        return this != PLAIN_TTL && this != UNFENCED_ROW && this != LEASE_CHECK;
    }

    /** Whether the checker must flag this arm: it is there to prove the checker can fail. */
    boolean isControl() {
        return control;
    }
}
