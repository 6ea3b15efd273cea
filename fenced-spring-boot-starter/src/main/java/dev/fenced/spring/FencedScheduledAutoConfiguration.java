package dev.fenced.spring;

import dev.fenced.lock.FencedLockClient;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.context.annotation.Bean;
import org.springframework.core.env.Environment;
import org.springframework.scheduling.config.TaskManagementConfigUtils;

/**
 * With scheduling enabled ({@code @EnableScheduling}), makes {@link FencedScheduled} methods run as jobs of the
 * application's {@link FencedLockClient}, under lock names prefixed with {@code fenced.jobs.name-prefix}.
 */
@AutoConfiguration(after = FencedLockAutoConfiguration.class)
@ConditionalOnClass(FencedLockClient.class)
@ConditionalOnBean(name = TaskManagementConfigUtils.SCHEDULED_ANNOTATION_PROCESSOR_BEAN_NAME)
public class FencedScheduledAutoConfiguration {

    /** Creates the auto-configuration; Spring calls this. */
    public FencedScheduledAutoConfiguration() {
    }

    /**
     * The post-processor that checks and proxies {@link FencedScheduled} methods. Static, as a post-processor must be;
     * the prefix is read from the environment, and the client is looked up at the first tick.
     *
     * @param clients the lock client
     * @param environment the environment, for {@code fenced.jobs.name-prefix}
     * @return the post-processor
     */
    @Bean
    static FencedScheduledPostProcessor fencedScheduledPostProcessor(ObjectProvider<FencedLockClient> clients,
            Environment environment) {
        String prefix = Binder.get(environment).bind("fenced.jobs.name-prefix", String.class).orElse("");
        return new FencedScheduledPostProcessor(clients, prefix);
    }
}
