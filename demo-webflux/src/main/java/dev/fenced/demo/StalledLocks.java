package dev.fenced.demo;

import dev.fenced.lock.ForceReleaseResult;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import org.springframework.stereotype.Component;

/**
 * The locks whose holder the demo has paused on purpose and that may be broken by hand: the locks panel offers
 * "break this lock" on these, and whoever paused the holder hears when it was broken. Thread-safe.
 */
@Component
class StalledLocks {

    private final Map<String, Consumer<ForceReleaseResult>> stalled = new ConcurrentHashMap<>();

    /** Marks {@code name} as held by a paused holder; {@code onBroken} hears each force-release of it. */
    void register(String name, Consumer<ForceReleaseResult> onBroken) {
        stalled.put(name, onBroken);
    }

    /** The holder of {@code name} is no longer paused (or the run is over); idempotent. */
    void unregister(String name) {
        stalled.remove(name);
    }

    /** Whether {@code name} is held by a paused holder now. */
    boolean isStalled(String name) {
        return stalled.containsKey(name);
    }

    /** Tells whoever paused the holder of {@code result.name()}, if anyone, that the lock was force-released. */
    void broken(ForceReleaseResult result) {
        Consumer<ForceReleaseResult> listener = stalled.get(result.name());
        if (listener != null) {
            listener.accept(result);
        }
    }
}
