package dev.fenced.torture;

import dev.fenced.testservices.TcpProxy;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * A lock service that hands every question to another one; a subclass changes only what it names (who the clients
 * connect as, where the ledger lives). Closing it closes the other one.
 */
abstract class ForwardingLockService implements LockService {

    /** The service the questions go to. */
    protected final LockService delegate;

    ForwardingLockService(LockService delegate) {
        this.delegate = delegate;
    }

    @Override
    public TcpProxy clientProxy() {
        return delegate.clientProxy();
    }

    @Override
    public Locker.Endpoint endpoint(TcpProxy proxy) {
        return delegate.endpoint(proxy);
    }

    @Override
    public String acquireMarker() {
        return delegate.acquireMarker();
    }

    @Override
    public @Nullable Holder holder(String lockId) {
        return delegate.holder(lockId);
    }

    @Override
    public Map<String, Holder> heldLocks(String prefix) {
        return delegate.heldLocks(prefix);
    }

    @Override
    public long counter(String lockId) {
        return delegate.counter(lockId);
    }

    @Override
    public String ledgerUrl(String sharedDatabase) {
        return delegate.ledgerUrl(sharedDatabase);
    }

    @Override
    public Ledger.Writes writes() {
        return delegate.writes();
    }

    @Override
    public void removeRunState(String prefix) {
        delegate.removeRunState(prefix);
    }

    @Override
    public void close() {
        delegate.close();
    }
}
