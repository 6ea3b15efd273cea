/**
 * Storage-side enforcement of fencing tokens for PostgreSQL over R2DBC.
 *
 * <p>Not yet implemented: this module is a placeholder so that the build has its final shape.
 */
@NullMarked
package dev.fenced.r2dbc;

import org.jspecify.annotations.NullMarked;
