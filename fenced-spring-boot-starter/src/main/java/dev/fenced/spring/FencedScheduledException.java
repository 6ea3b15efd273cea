package dev.fenced.spring;

import java.lang.reflect.Method;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.BeanInitializationException;

/**
 * A {@link FencedScheduled} method is configured wrongly; the application context does not start. Carries the bean
 * and the method. Immutable.
 */
public final class FencedScheduledException extends BeanInitializationException {

    private static final long serialVersionUID = 1L;

    private final String beanName;
    private final String method;

    private FencedScheduledException(String beanName, Method method, String problem, @Nullable Throwable cause) {
        super("@FencedScheduled method " + describe(method) + " of bean '" + beanName + "': " + problem, cause);
        this.beanName = beanName;
        this.method = describe(method);
    }

    /**
     * The method is not {@code @Scheduled}: nothing would run it on a schedule.
     *
     * @param beanName the bean
     * @param method the method
     * @return the exception
     */
    public static FencedScheduledException notScheduled(String beanName, Method method) {
        return new FencedScheduledException(beanName, method, "it is not @Scheduled, so nothing runs it as a job; add "
                + "@Scheduled (and @EnableScheduling)", null);
    }

    /**
     * The name is blank after its placeholders were resolved.
     *
     * @param beanName the bean
     * @param method the method
     * @return the exception
     */
    public static FencedScheduledException blankName(String beanName, Method method) {
        return new FencedScheduledException(beanName, method, "name must not be blank", null);
    }

    /**
     * A duration attribute does not parse.
     *
     * @param beanName the bean
     * @param method the method
     * @param attribute the attribute
     * @param value its value, placeholders resolved
     * @param cause the parser's error
     * @return the exception
     */
    public static FencedScheduledException badDuration(String beanName, Method method, String attribute, String value,
            Throwable cause) {
        return new FencedScheduledException(beanName, method, attribute + " '" + value + "' is not a duration (use a "
                + "Spring Boot duration such as 30s, 5m or PT5M)", cause);
    }

    /**
     * lockAtLeastFor is longer than lockAtMostFor.
     *
     * @param beanName the bean
     * @param method the method
     * @param lockAtLeastFor its lockAtLeastFor
     * @param lockAtMostFor its lockAtMostFor
     * @return the exception
     */
    public static FencedScheduledException atLeastLongerThanAtMost(String beanName, Method method,
            java.time.Duration lockAtLeastFor, java.time.Duration lockAtMostFor) {
        return new FencedScheduledException(beanName, method, "lockAtLeastFor (" + lockAtLeastFor + ") must not be longer "
                + "than lockAtMostFor (" + lockAtMostFor + ")", null);
    }

    /**
     * Any other setting the job refuses (a lock name with braces, a duration out of range, an unsupported return
     * type).
     *
     * @param beanName the bean
     * @param method the method
     * @param problem what is wrong
     * @param cause the refusal, if any
     * @return the exception
     */
    public static FencedScheduledException invalid(String beanName, Method method, String problem, @Nullable Throwable cause) {
        return new FencedScheduledException(beanName, method, problem, cause);
    }

    /**
     * The bean whose method is at fault.
     *
     * @return the bean name
     */
    public String beanName() {
        return beanName;
    }

    /**
     * The method at fault, as {@code SimpleClassName.method()}.
     *
     * @return the method
     */
    public String method() {
        return method;
    }

    private static String describe(Method method) {
        return method.getDeclaringClass().getSimpleName() + "." + method.getName() + "()";
    }
}
