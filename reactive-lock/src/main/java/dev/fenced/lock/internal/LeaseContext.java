package dev.fenced.lock.internal;

import dev.fenced.lock.FencedLease;
import java.util.HashMap;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import reactor.util.context.Context;
import reactor.util.context.ContextView;

/**
 * The leases held by the enclosing {@code withLease} scopes, as one Reactor Context entry: a map by lock
 * name plus the innermost lease. Immutable and thread-safe.
 */
public final class LeaseContext {

    private static final Class<LeaseContext> KEY = LeaseContext.class;

    private final Map<String, FencedLease> byName;
    private final FencedLease innermost;

    private LeaseContext(Map<String, FencedLease> byName, FencedLease innermost) {
        this.byName = byName;
        this.innermost = innermost;
    }

    /**
     * The lease on {@code name} held by an enclosing scope.
     *
     * @param context the subscriber's context
     * @param name the lock name
     * @return the lease, or {@code null}
     */
    public static @Nullable FencedLease find(ContextView context, String name) {
        LeaseContext scope = context.getOrDefault(KEY, null);
        return scope == null ? null : scope.byName.get(name);
    }

    /**
     * The lease of the innermost enclosing scope.
     *
     * @param context the subscriber's context
     * @return the lease, or {@code null}
     */
    public static @Nullable FencedLease innermost(ContextView context) {
        LeaseContext scope = context.getOrDefault(KEY, null);
        return scope == null ? null : scope.innermost;
    }

    /**
     * The context with {@code lease} added as the innermost scope.
     *
     * @param context the enclosing context
     * @param lease the lease
     * @return the new context
     */
    public static Context with(Context context, FencedLease lease) {
        LeaseContext scope = context.getOrDefault(KEY, null);
        Map<String, FencedLease> byName = scope == null ? new HashMap<>() : new HashMap<>(scope.byName);
        byName.put(lease.name(), lease);
        return context.put(KEY, new LeaseContext(Map.copyOf(byName), lease));
    }
}
