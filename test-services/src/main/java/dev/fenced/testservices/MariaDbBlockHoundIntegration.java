package dev.fenced.testservices;

import reactor.blockhound.BlockHound;
import reactor.blockhound.integration.BlockHoundIntegration;

/**
 * The MariaDB driver reads files on the event loop while it connects for the first time: its version from a
 * properties resource, and its authentication plugins through a {@code ServiceLoader}. That is the driver's own
 * start-up, once per JVM, not code of ours. It also guards each connection's message queue with a
 * {@code ReentrantLock} held for a few instructions, which BlockHound reports when two threads meet there.
 *
 * <p>Not registered by this module (its own registration file covers Netty and Lettuce): a module whose tests use
 * MariaDB lists it in its test resources' {@code META-INF/services/reactor.blockhound.integration.BlockHoundIntegration}.
 * Stateless, so thread-safe.
 */
public final class MariaDbBlockHoundIntegration implements BlockHoundIntegration {

    /** Creates the integration; {@code ServiceLoader} calls this. */
    public MariaDbBlockHoundIntegration() {
    }

    @Override
    public void applyTo(BlockHound.Builder builder) {
        builder.allowBlockingCallsInside("org.mariadb.r2dbc.authentication.AuthenticationFlowPluginLoader", "get");
        builder.allowBlockingCallsInside("org.mariadb.r2dbc.util.VersionFactory", "getInstance");
        for (String method : new String[] {"lambda$receive$15", "lambda$sendCommand$17", "lambda$sendCommand$20",
            "setAutoCommit", "sendCommandWithoutResult", "executeWhenTransaction", "executeWhenNotInTransaction"}) {
            builder.allowBlockingCallsInside("org.mariadb.r2dbc.client.SimpleClient", method);
        }
        builder.allowBlockingCallsInside("org.mariadb.r2dbc.client.SimpleClient$ServerMessageSubscriber", "tryDrainQueue");
    }
}
