package dev.fenced.r2dbc.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks the property (a {@code long} or {@code Long}, column {@code bigint}) that holds the fencing token of the
 * last write accepted for the row, as {@code @Version} marks a version. {@link FencedEntityTemplate} guards its
 * writes on it and sets it to the lease's token. Without a {@link FencingOwner} property the entity's table
 * carries the token alone and writes use {@link dev.fenced.r2dbc.FencingRule#STRICTLY_NEWER}.
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target({ElementType.FIELD, ElementType.METHOD, ElementType.ANNOTATION_TYPE})
public @interface FencingToken {
}
