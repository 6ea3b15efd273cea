package dev.fenced.lock.internal;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * Tokens that storage has seen and the lock service may not know of (it lost its counter), per lock name:
 * the next acquire of the name passes its floor to the store, which mints a token above it. Thread-safe.
 */
final class TokenFloors {

    private static final Logger log = Loggers.getLogger(TokenFloors.class);

    /** The largest token the scripts handle exactly (Lua numbers are doubles). */
    static final long MAX_TOKEN = 1L << 53;

    private final Map<String, Long> floors = new ConcurrentHashMap<>();

    /** Makes the next acquire of {@code name} take a token above {@code floor}. */
    void raise(String name, long floor) {
        if (floor > MAX_TOKEN) {
            log.warn("Ignoring token floor {} for lock '{}': tokens above 2^53 are not supported", floor, name);
            return;
        }
        floors.merge(name, floor, Math::max);
    }

    /** The floor of the next acquire of {@code name}, or 0. */
    long of(String name) {
        return floors.getOrDefault(name, 0L);
    }

    /** An acquire with {@code floor} succeeded: the floor is passed (unless a higher one came meanwhile). */
    void passed(String name, long floor) {
        if (floor > 0) {
            floors.remove(name, floor);
        }
    }
}
