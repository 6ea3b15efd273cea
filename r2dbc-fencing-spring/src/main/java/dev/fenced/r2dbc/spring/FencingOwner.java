package dev.fenced.r2dbc.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks the property (a {@code String}, column {@code text}) that holds the owner id of the lease whose token the
 * {@link FencingToken} property holds. With it, writes use {@link dev.fenced.r2dbc.FencingRule#SAME_LEASE_OR_NEWER}:
 * the same lease may write the row again, and a retried write is idempotent.
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target({ElementType.FIELD, ElementType.METHOD, ElementType.ANNOTATION_TYPE})
public @interface FencingOwner {
}
