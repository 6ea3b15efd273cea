package dev.fenced.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Runs a {@code @Scheduled} method as a {@link dev.fenced.lock.FencedJob}: on one instance at a time, under the lock
 * {@code fenced.jobs.name-prefix + name}, skipped when another instance (or a tick of this instance still running)
 * holds it, cancelled at {@link #lockAtMostFor()}, the lock kept at least {@link #lockAtLeastFor()} after the grant by
 * the lock server's clock. See {@link dev.fenced.lock.FencedLockClient#runJob(dev.fenced.lock.FencedJob,
 * java.util.function.Supplier)} for the semantics and {@link dev.fenced.lock.JobOutcome} for the outcomes.
 *
 * <pre>{@code
 * @Scheduled(cron = "0 0 2 * * *")
 * @FencedScheduled(name = "report:nightly", lockAtMostFor = "30m", lockAtLeastFor = "5m")
 * Mono<Void> nightlyReport() { return reports.build(); }
 * }</pre>
 *
 * <p><b>Reactive methods</b> (returning {@code Mono}, {@code Flux} or {@code Publisher}; Spring runs them since 6.1):
 * Spring calls the method once and subscribes to its publisher at every tick; each subscription is one tick of the
 * job, which subscribes to the method's publisher under the lock, with the lease in its Reactor Context
 * ({@code FencedLease.current(name)}, fenced writes). The publisher must be cold, as Spring requires anyway.
 *
 * <p><b>Plain methods</b> run on Reactor's {@code boundedElastic} scheduler while the calling (scheduler) thread waits
 * for the tick to end; called on a non-blocking thread (a Reactor or Netty event loop) they fail at once with
 * {@link IllegalStateException}. At lockAtMostFor the thread running the method is interrupted; a method that ignores
 * interruption runs on without its lease (its fenced writes are refused), and the calling thread waits for it before
 * it returns, so this instance does not start the next tick meanwhile; a call from another thread (a second schedule
 * on the method, another caller) is skipped, logged at WARN, until the method has returned. A method whose task is
 * still queued on {@code boundedElastic} when its tick is cut off (or loses its lease) is never started. A plain
 * method returns {@code void}: a skipped tick has no value to return, and Spring ignores the value anyway.
 *
 * <p>In both cases a job that fails propagates its error, as without the annotation (the tick's outcome is also
 * logged); a tick that is skipped, cut off, lost or finds the lock server down completes normally, so the schedule
 * goes on. The bean is proxied (a CGLIB subclass), so the class must not be final, and only calls through the proxy
 * (the scheduler's) are guarded. Methods of the same {@code name} share one lock: they never run at once, in this
 * instance or across instances (a tick of one is skipped while another holds the lock).
 *
 * <p>Start-up fails with {@link FencedScheduledException} for a method that is not {@code @Scheduled}, a final,
 * private or static method (the proxy cannot intercept it, so it would run with no lock), a plain method that does
 * not return {@code void}, a blank or invalid name, a duration that does not parse, or
 * {@code lockAtLeastFor > lockAtMostFor}. Attribute values may hold
 * {@code ${...}} placeholders; durations are Spring Boot duration strings ({@code 30s}, {@code 5m}, {@code PT5M}).
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface FencedScheduled {

    /**
     * The lock name, after {@code fenced.jobs.name-prefix}: not blank, no braces or control characters.
     *
     * @return the name
     */
    String name();

    /**
     * The longest the lock may be held: the job is cancelled there and the lock released. Required.
     *
     * @return a duration string
     */
    String lockAtMostFor();

    /**
     * How long after the grant the lock stays taken at least, also after a job that ended sooner; not longer than
     * {@link #lockAtMostFor()}. Default: none.
     *
     * @return a duration string, or empty for none
     */
    String lockAtLeastFor() default "";
}
