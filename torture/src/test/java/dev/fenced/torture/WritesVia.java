package dev.fenced.torture;

import org.jspecify.annotations.Nullable;

/**
 * A lock service whose run keeps its ledger in another database and writes it another way ({@link Ledger.Writes}):
 * the locks stay where {@code locks} has them, only {@link #ledgerUrl} and {@link #writes} change. Closing it closes
 * {@code locks}.
 */
final class WritesVia extends ForwardingLockService {

    private final @Nullable String ledgerUrl;
    private final Ledger.Writes writes;

    /**
     * @param locks where the locks live
     * @param ledgerUrl the ledger's database, or {@code null} for the one {@code locks} names
     * @param writes how the workers write it
     */
    WritesVia(LockService locks, @Nullable String ledgerUrl, Ledger.Writes writes) {
        super(locks);
        this.ledgerUrl = ledgerUrl;
        this.writes = writes;
    }

    @Override
    public String ledgerUrl(String sharedDatabase) {
        return ledgerUrl != null ? ledgerUrl : super.ledgerUrl(sharedDatabase);
    }

    @Override
    public Ledger.Writes writes() {
        return writes;
    }
}
