/**
 * Spring Boot auto-configuration of Fenced: a {@link dev.fenced.lock.FencedLockClient} configured from
 * {@code fenced.*} properties, lock metrics with Micrometer, a health indicator with Actuator. User beans
 * win; the client is closed, and its held leases released, when the context closes.
 */
@NullMarked
package dev.fenced.spring;

import org.jspecify.annotations.NullMarked;
