package dev.fenced.spring;

import dev.fenced.lock.FencedJob;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.lock.JobOutcome;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.UndeclaredThrowableException;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;
import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import org.springframework.aop.framework.AbstractAdvisingBeanPostProcessor;
import org.springframework.aop.framework.AopProxyUtils;
import org.springframework.aop.support.AopUtils;
import org.springframework.aop.support.DefaultPointcutAdvisor;
import org.springframework.aop.support.annotation.AnnotationMatchingPointcut;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.BeanFactoryAware;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.ConfigurableBeanFactory;
import org.springframework.boot.convert.DurationStyle;
import org.springframework.core.BridgeMethodResolver;
import org.springframework.core.MethodIntrospector;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.scheduling.annotation.Scheduled;
import org.springframework.scheduling.annotation.Schedules;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * Proxies beans with {@link FencedScheduled} methods so that each call runs as a job of the {@link FencedLockClient}.
 * Every annotated method is checked when its bean is initialized (a {@link FencedScheduledException} stops the
 * start-up). Ordered before Spring's {@code ScheduledAnnotationBeanPostProcessor}, so the scheduler calls the proxy.
 * Thread-safe once the context has started.
 */
final class FencedScheduledPostProcessor extends AbstractAdvisingBeanPostProcessor implements BeanFactoryAware {

    private static final long serialVersionUID = 1L;
    private static final Logger log = Loggers.getLogger(FencedScheduledPostProcessor.class);

    private final transient ObjectProvider<FencedLockClient> clients;
    private final String namePrefix;
    private final transient Map<Method, Plan> plans = new ConcurrentHashMap<>();
    /** The plain calls of this context whose method has not returned yet, whatever their tick's outcome. */
    private final transient Set<PlainRun> plainRuns = ConcurrentHashMap.newKeySet();
    private transient @Nullable ConfigurableBeanFactory beanFactory;

    /**
     * @param clients the lock client, looked up at the first tick
     * @param namePrefix prepended to every job's name ({@code fenced.jobs.name-prefix})
     */
    FencedScheduledPostProcessor(ObjectProvider<FencedLockClient> clients, String namePrefix) {
        this.clients = clients;
        this.namePrefix = namePrefix;
        this.advisor = new DefaultPointcutAdvisor(new AnnotationMatchingPointcut(null, FencedScheduled.class, true),
                new JobInterceptor());
        setBeforeExistingAdvisors(true);
        setProxyTargetClass(true); // the scheduler calls methods that may be on no interface
        setOrder(Ordered.LOWEST_PRECEDENCE - 1); // before ScheduledAnnotationBeanPostProcessor (LOWEST_PRECEDENCE)
    }

    @Override
    public void setBeanFactory(BeanFactory beanFactory) {
        this.beanFactory = beanFactory instanceof ConfigurableBeanFactory c ? c : null;
    }

    @Override
    public Object postProcessAfterInitialization(Object bean, String beanName) {
        Class<?> target = AopProxyUtils.ultimateTargetClass(bean);
        Map<Method, FencedScheduled> annotated = MethodIntrospector.selectMethods(target,
                (MethodIntrospector.MetadataLookup<FencedScheduled>) method ->
                        AnnotatedElementUtils.findMergedAnnotation(method, FencedScheduled.class));
        if (annotated.isEmpty()) {
            return bean;
        }
        annotated.forEach((method, annotation) -> plans.put(method, plan(beanName, method, annotation)));
        return super.postProcessAfterInitialization(bean, beanName);
    }

    /** Checks one annotated method and makes its job. */
    private Plan plan(String beanName, Method method, FencedScheduled annotation) {
        if (!AnnotatedElementUtils.hasAnnotation(method, Scheduled.class)
                && !AnnotatedElementUtils.hasAnnotation(method, Schedules.class)) {
            throw FencedScheduledException.notScheduled(beanName, method);
        }
        int modifiers = method.getModifiers();
        if (Modifier.isStatic(modifiers) || Modifier.isPrivate(modifiers) || Modifier.isFinal(modifiers)) {
            String kind = Modifier.isStatic(modifiers) ? "static" : Modifier.isPrivate(modifiers) ? "private" : "final";
            throw FencedScheduledException.invalid(beanName, method, "it is " + kind + ", so the proxy cannot run it "
                    + "under its lock (each call would run unguarded); make it a non-final, non-private instance method", null);
        }
        String name = resolve(annotation.name()).strip();
        if (name.isEmpty()) {
            throw FencedScheduledException.blankName(beanName, method);
        }
        String atMostValue = resolve(annotation.lockAtMostFor()).strip();
        if (atMostValue.isEmpty()) {
            throw FencedScheduledException.invalid(beanName, method, "lockAtMostFor is required", null);
        }
        Duration atMost = duration(beanName, method, "lockAtMostFor", atMostValue);
        String atLeastValue = resolve(annotation.lockAtLeastFor()).strip();
        Duration atLeast = atLeastValue.isEmpty() ? Duration.ZERO : duration(beanName, method, "lockAtLeastFor", atLeastValue);
        if (atLeast.compareTo(atMost) > 0) {
            throw FencedScheduledException.atLeastLongerThanAtMost(beanName, method, atLeast, atMost);
        }
        Class<?> returns = method.getReturnType();
        boolean reactive = Publisher.class.isAssignableFrom(returns);
        if (reactive && returns != Mono.class && returns != Flux.class && returns != Publisher.class) {
            throw FencedScheduledException.invalid(beanName, method, "it returns " + returns.getName()
                    + "; a reactive @FencedScheduled method returns Mono, Flux or Publisher", null);
        }
        if (!reactive && returns != void.class) {
            // A skipped or cut-off tick has no value to return, and Spring ignores a scheduled method's value anyway.
            throw FencedScheduledException.invalid(beanName, method, "it returns " + returns.getName()
                    + "; a plain @FencedScheduled method returns void (a reactive one Mono, Flux or Publisher)", null);
        }
        try {
            FencedJob job = FencedJob.of(namePrefix + name, atMost).withLockAtLeastFor(atLeast);
            return new Plan(job, reactive, returns == Flux.class, beanName + "." + method.getName());
        } catch (IllegalArgumentException e) {
            throw FencedScheduledException.invalid(beanName, method, e.getMessage(), e);
        }
    }

    private Duration duration(String beanName, Method method, String attribute, String value) {
        try {
            return DurationStyle.detectAndParse(value);
        } catch (IllegalArgumentException e) {
            throw FencedScheduledException.badDuration(beanName, method, attribute, value, e);
        }
    }

    private String resolve(String value) {
        ConfigurableBeanFactory factory = beanFactory;
        if (factory == null) {
            return value;
        }
        String resolved = factory.resolveEmbeddedValue(value);
        return resolved == null ? "" : resolved;
    }

    /** The job of the method, checked. */
    FencedJob jobOf(Method method) {
        Plan plan = plans.get(method);
        if (plan == null) {
            throw new IllegalArgumentException("no @FencedScheduled method: " + method);
        }
        return plan.job();
    }

    /**
     * What a method's calls run.
     *
     * @param job the job
     * @param reactive whether the method returns a publisher
     * @param flux whether it returns a Flux
     * @param label the bean and method, for errors
     */
    private record Plan(FencedJob job, boolean reactive, boolean flux, String label) {
    }

    /** Runs each call of an annotated method as a tick of its job. */
    private final class JobInterceptor implements MethodInterceptor {

        @Override
        public @Nullable Object invoke(MethodInvocation invocation) throws Throwable {
            Object target = invocation.getThis();
            Method method = invocation.getMethod();
            if (target != null) {
                method = BridgeMethodResolver.findBridgedMethod(AopUtils.getMostSpecificMethod(method, AopUtils.getTargetClass(target)));
            }
            Plan plan = plans.get(method);
            if (plan == null) {
                return invocation.proceed();
            }
            return plan.reactive() ? reactive(plan, invocation) : plain(plan, invocation);
        }

        /**
         * Spring calls a reactive scheduled method once and subscribes to its publisher at every tick: each
         * subscription here is one tick, which subscribes to the method's publisher under the lock.
         */
        private Object reactive(Plan plan, MethodInvocation invocation) throws Throwable {
            Object published = invocation.proceed();
            if (!(published instanceof Publisher<?> source)) {
                return published;
            }
            Mono<Void> ticks = Mono.defer(() -> clients.getObject().runJob(plan.job(), source)).flatMap(JobInterceptor::failure);
            return plan.flux() ? ticks.flux() : ticks;
        }

        /** Blocks the calling thread for one tick; the method runs on boundedElastic under the lock. */
        private @Nullable Object plain(Plan plan, MethodInvocation invocation) throws Throwable {
            if (Schedulers.isInNonBlockingThread()) {
                throw new IllegalStateException("@FencedScheduled method " + plan.label() + " blocks until its job ends, "
                        + "but was called on a non-blocking thread (" + Thread.currentThread().getName() + "): call it "
                        + "from a scheduler thread, or make it return Mono or Flux");
            }
            String name = plan.job().name();
            for (PlainRun earlier : plainRuns) {
                if (earlier.overruns(name)) {
                    // Its tick has ended (the lock is released), but its method has not: never two copies at once here.
                    log.warn("Job '{}' skipped: the method of its tick cut off at lockAtMostFor (or that lost its lock) "
                            + "is still running in this instance", name);
                    return null;
                }
            }
            PlainRun run = new PlainRun(name, invocation);
            plainRuns.add(run);
            JobOutcome outcome;
            try {
                outcome = clients.getObject().runJob(plan.job(), run.body()).block();
                run.awaitEnd();
            } finally {
                plainRuns.remove(run);
            }
            if (outcome != null && outcome.status() == JobOutcome.Status.FAILED && outcome.error().isPresent()) {
                throw unwrap(outcome.error().get());
            }
            return run.result();
        }

        private static Mono<Void> failure(JobOutcome outcome) {
            if (outcome.status() == JobOutcome.Status.FAILED && outcome.error().isPresent()) {
                return Mono.error(unwrap(outcome.error().get()));
            }
            return Mono.empty();
        }

        private static Throwable unwrap(Throwable error) {
            return error instanceof UndeclaredThrowableException u && u.getUndeclaredThrowable() != null
                    ? u.getUndeclaredThrowable() : error;
        }
    }

    /**
     * One call of a plain method as a job's body: it runs on boundedElastic, is interrupted when the tick is
     * cancelled (cut off at lockAtMostFor, the lease lost), is not started at all if the tick was cancelled while its
     * task was still queued, and the caller can wait for it to end.
     */
    private static final class PlainRun {

        private final String job;
        private final MethodInvocation invocation;
        private final CountDownLatch ended = new CountDownLatch(1);
        private final AtomicReference<@Nullable Object> result = new AtomicReference<>();
        private volatile boolean started;
        private @Nullable Thread runner; // guarded by this
        private boolean cancelled; // guarded by this

        PlainRun(String job, MethodInvocation invocation) {
            this.job = job;
            this.invocation = invocation;
        }

        /** Whether this is a call of {@code name} whose tick was cancelled while its method still runs. */
        boolean overruns(String name) {
            synchronized (this) {
                if (!cancelled) {
                    return false;
                }
            }
            return job.equals(name) && ended.getCount() > 0;
        }

        Mono<Object> body() {
            return Mono.<Object>create(sink -> {
                sink.onCancel(this::interrupt);
                started = true;
                try {
                    Schedulers.boundedElastic().schedule(() -> run(sink));
                } catch (RuntimeException rejected) {
                    ended.countDown();
                    sink.error(rejected);
                }
            });
        }

        private void run(reactor.core.publisher.MonoSink<Object> sink) {
            synchronized (this) {
                if (cancelled) {
                    // Cut off (or lost) while queued: the lock may be gone already, so the method must not start.
                    ended.countDown();
                    return;
                }
                runner = Thread.currentThread();
            }
            try {
                result.set(invocation.proceed());
                sink.success();
            } catch (Throwable e) {
                sink.error(e instanceof RuntimeException || e instanceof Error ? e : new UndeclaredThrowableException(e));
            } finally {
                synchronized (this) {
                    runner = null;
                }
                Thread.interrupted(); // an interrupt aimed at this call must not reach the pool's next task
                ended.countDown();
            }
        }

        private synchronized void interrupt() {
            cancelled = true;
            Thread thread = runner;
            if (thread != null) {
                thread.interrupt();
            }
        }

        void awaitEnd() throws InterruptedException {
            if (started) {
                ended.await();
            }
        }

        @Nullable Object result() {
            return result.get();
        }
    }
}
