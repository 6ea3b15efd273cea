/**
 * A Spring Boot WebFlux service that shows Fenced at work: invoices processed under a fenced lease
 * ({@code POST /invoices/{id}/process}), a back-pressured batch ({@code POST /invoices/settle}), and the
 * stalled-holder failure replayed live and stopped by the storage ({@code POST /scenario/replay}, drawn by
 * the page at {@code /}), the fleet view of the demo's locks streamed live with "break this lock" on a stuck
 * holder's lock ({@code GET /locks/stream}, {@code POST /locks/force-release}), and a scheduled job on two instances
 * whose stalled runner is cut off and refused by the storage ({@code GET /jobs/events}, {@code POST /jobs/stall},
 * {@code POST /jobs/replay}).
 *
 * <p>Uses only the public packages {@code dev.fenced.lock} and {@code dev.fenced.r2dbc}.
 */
@NullMarked
package dev.fenced.demo;

import org.jspecify.annotations.NullMarked;
