package dev.fenced.testservices;

/**
 * Where a shared test server came from, in the order the extensions try them. Immutable and thread-safe.
 */
public enum ServiceSource {
    /** An existing server named by an environment variable; the tests neither start nor stop it. */
    ENVIRONMENT,
    /** A container started by Testcontainers on a local Docker engine. */
    TESTCONTAINERS,
    /** A process started from a binary shipped in a Maven artifact (or, for Redis, found on the PATH). */
    EMBEDDED
}
