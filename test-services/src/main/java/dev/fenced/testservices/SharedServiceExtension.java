package dev.fenced.testservices;

import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;

/**
 * What the service extensions share: they inject the JVM-wide server of one type and stop it when the
 * JUnit engine finishes. Thread-safe; holds no state beyond the shared service.
 *
 * @param <S> the server type
 */
abstract class SharedServiceExtension<S> implements BeforeAllCallback, ParameterResolver {

    private final Class<S> type;
    private final SharedService<S> shared;

    SharedServiceExtension(Class<S> type, SharedService<S> shared) {
        this.type = type;
        this.shared = shared;
    }

    /** Arranges for a server started later to be stopped when the engine finishes. Starts nothing. */
    @Override
    public final void beforeAll(ExtensionContext context) {
        shared.stopWhenEngineFinishes(context);
    }

    /** Supports parameters of the server type. */
    @Override
    public final boolean supportsParameter(ParameterContext parameterContext, ExtensionContext extensionContext) {
        return parameterContext.getParameter().getType() == type;
    }

    /** Returns the shared server, starting it if this is the first use. */
    @Override
    public final S resolveParameter(ParameterContext parameterContext, ExtensionContext extensionContext) {
        shared.stopWhenEngineFinishes(extensionContext);
        return shared.get();
    }
}
