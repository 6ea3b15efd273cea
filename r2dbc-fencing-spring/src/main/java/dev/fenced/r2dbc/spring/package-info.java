/**
 * Fenced writes with Spring: through a {@code DatabaseClient} ({@link dev.fenced.r2dbc.spring.FencedDatabaseClient},
 * needs {@code spring-r2dbc} only), and of Spring Data R2DBC entities, in the spirit of {@code @Version} optimistic
 * locking (needs {@code spring-data-r2dbc}, an optional dependency of this module): map the token
 * column on the entity with {@link dev.fenced.r2dbc.spring.FencingToken} (and, optionally, the owner column with
 * {@link dev.fenced.r2dbc.spring.FencingOwner}), and update or save it with
 * {@link dev.fenced.r2dbc.spring.FencedEntityTemplate} and the lease that guards it.
 */
@NullMarked
package dev.fenced.r2dbc.spring;

import org.jspecify.annotations.NullMarked;
