package dev.fenced.torture;

import dev.fenced.testservices.TcpProxy;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.output.NestedMultiOutput;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.CommandType;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

/**
 * The shared Redis, reached by every lock client of the run as a user that has exactly the ACL the README's "Redis
 * requirements" lists, read from the README itself, with the key prefix {@code torture-} in its patterns (every
 * run's prefix starts so) and nothing more. The harness itself (holders, counters, clean-up) stays the default user.
 * The user is deleted on close. Thread-safe for one nemesis thread.
 */
final class RestrictedRedis extends ForwardingLockService {

    private final RedisTopology redis;
    private final String user = "torture-acl-" + UUID.randomUUID();
    private final String password = UUID.randomUUID().toString();

    private RestrictedRedis(RedisTopology redis) {
        super(redis);
        this.redis = redis;
    }

    static RestrictedRedis shared(String host, int port) {
        RestrictedRedis restricted = new RestrictedRedis(RedisTopology.shared(host, port));
        List<String> args = new ArrayList<>(List.of("SETUSER", restricted.user, "reset", ">" + restricted.password));
        args.addAll(readmeAcl("torture-"));
        restricted.acl(args);
        return restricted;
    }

    /** The rules of the README's ACL line, for keys and channels under {@code prefix}. */
    static List<String> readmeAcl(String prefix) {
        String readme;
        try {
            readme = Files.readString(Path.of("..", "README.md"));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        String start = "ACL SETUSER app on >secret ";
        int at = readme.indexOf(start, readme.indexOf("### Redis requirements"));
        if (at < 0) {
            throw new IllegalStateException("The README's Redis requirements list no ACL line");
        }
        List<String> rules = new ArrayList<>(List.of("on"));
        for (String rule : readme.substring(at + start.length(), readme.indexOf('\n', at)).strip().split("\\s+")) {
            rules.add(rule.replace("fenced:", prefix));
        }
        return rules;
    }

    private void acl(List<String> args) {
        CommandArgs<String, String> command = new CommandArgs<>(StringCodec.UTF8);
        args.forEach(command::add);
        redis.onPrimary(c -> c.dispatch(CommandType.ACL, new NestedMultiOutput<>(StringCodec.UTF8), command));
    }

    /** The lock clients connect as the restricted user. */
    @Override
    public Locker.Endpoint endpoint(TcpProxy proxy) {
        return new Locker.RedisEndpoint("redis://" + user + ":" + password + "@" + proxy.host() + ":" + proxy.port());
    }

    @Override
    public void close() {
        try {
            acl(List.of("DELUSER", user));
        } finally {
            super.close();
        }
    }
}
