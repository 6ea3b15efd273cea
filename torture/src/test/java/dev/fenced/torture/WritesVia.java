package dev.fenced.torture;

import dev.fenced.testservices.TcpProxy;
import org.jspecify.annotations.Nullable;

/**
 * A lock service whose run keeps its ledger in another database and writes it another way ({@link Ledger.Writes}):
 * the locks stay where {@code locks} has them, only {@link #ledgerUrl} and {@link #writes} change. Closing it closes
 * {@code locks}.
 */
final class WritesVia implements LockService {

    private final LockService locks;
    private final @Nullable String ledgerUrl;
    private final Ledger.Writes writes;

    /**
     * @param locks where the locks live
     * @param ledgerUrl the ledger's database, or {@code null} for the one {@code locks} names
     * @param writes how the workers write it
     */
    WritesVia(LockService locks, @Nullable String ledgerUrl, Ledger.Writes writes) {
        this.locks = locks;
        this.ledgerUrl = ledgerUrl;
        this.writes = writes;
    }

    @Override
    public TcpProxy clientProxy() {
        return locks.clientProxy();
    }

    @Override
    public Locker.Endpoint endpoint(TcpProxy proxy) {
        return locks.endpoint(proxy);
    }

    @Override
    public String acquireMarker() {
        return locks.acquireMarker();
    }

    @Override
    public @Nullable Holder holder(String lockId) {
        return locks.holder(lockId);
    }

    @Override
    public java.util.Map<String, Holder> heldLocks(String prefix) {
        return locks.heldLocks(prefix);
    }

    @Override
    public long counter(String lockId) {
        return locks.counter(lockId);
    }

    @Override
    public String ledgerUrl(String sharedDatabase) {
        return ledgerUrl != null ? ledgerUrl : locks.ledgerUrl(sharedDatabase);
    }

    @Override
    public Ledger.Writes writes() {
        return writes;
    }

    @Override
    public void removeRunState(String prefix) {
        locks.removeRunState(prefix);
    }

    @Override
    public void close() {
        locks.close();
    }
}
