package dev.fenced.lock.internal;

import dev.fenced.lock.FencedLease;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import reactor.util.context.Context;
import reactor.util.context.ContextView;

/**
 * The leases held by the enclosing {@code withLease} scopes, as one Reactor Context entry: a map by lock
 * name plus the leases in scope order. Immutable and thread-safe.
 */
public final class LeaseContext {

    private static final Class<LeaseContext> KEY = LeaseContext.class;

    private final Map<String, FencedLease> byName;
    private final List<FencedLease> ordered;

    private LeaseContext(Map<String, FencedLease> byName, List<FencedLease> ordered) {
        this.byName = byName;
        this.ordered = ordered;
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
     * The leases of the enclosing scopes, outermost first, one per lock name.
     *
     * @param context the subscriber's context
     * @return the leases; empty outside any scope
     */
    public static List<FencedLease> all(ContextView context) {
        LeaseContext scope = context.getOrDefault(KEY, null);
        return scope == null ? List.of() : scope.ordered;
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
        List<FencedLease> ordered = new ArrayList<>(scope == null ? List.of() : scope.ordered);
        FencedLease replaced = byName.put(lease.name(), lease);
        if (replaced != null) {
            ordered.remove(replaced);
        }
        ordered.add(lease);
        return context.put(KEY, new LeaseContext(Map.copyOf(byName), List.copyOf(ordered)));
    }
}
