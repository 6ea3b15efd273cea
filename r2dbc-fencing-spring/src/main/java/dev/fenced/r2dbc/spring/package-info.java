/**
 * Fenced writes of Spring Data R2DBC entities, in the spirit of {@code @Version} optimistic locking: map the token
 * column on the entity with {@link dev.fenced.r2dbc.spring.FencingToken} (and, optionally, the owner column with
 * {@link dev.fenced.r2dbc.spring.FencingOwner}), and update or save it with
 * {@link dev.fenced.r2dbc.spring.FencedEntityTemplate} and the lease that guards it.
 */
@NullMarked
package dev.fenced.r2dbc.spring;

import org.jspecify.annotations.NullMarked;
