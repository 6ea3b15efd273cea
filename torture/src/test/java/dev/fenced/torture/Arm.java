package dev.fenced.torture;

/** What locks and guards the workload's writes: the library, or a control arm that the checker must flag. */
enum Arm {

    /** Fenced leases, reads claimed and writes guarded by {@code FencedWrite} (the library's default rule). */
    FENCED("fenced", false),

    /**
     * Control: Fenced leases, but storage accepts a token iff {@code stored <= presented}, with no owner check.
     * A token re-issued after a failover then lets two holders write.
     */
    TOKEN_ONLY("control: token <= only", true),

    /** Control: a plain TTL lock ({@code SET NX PX}, no renewal, no token checked) and unguarded writes. */
    PLAIN_TTL("control: plain TTL lock", true);

    private final String label;
    private final boolean control;

    Arm(String label, boolean control) {
        this.label = label;
        this.control = control;
    }

    String label() {
        return label;
    }

    /** Whether the checker must flag this arm: it is there to prove the checker can fail. */
    boolean isControl() {
        return control;
    }
}
