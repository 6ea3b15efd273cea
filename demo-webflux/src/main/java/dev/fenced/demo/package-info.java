/**
 * A Spring Boot WebFlux service that shows Fenced at work.
 *
 * <p>Not yet implemented: this module is a placeholder so that the build has its final shape.
 */
@NullMarked
package dev.fenced.demo;

import org.jspecify.annotations.NullMarked;
