package dev.fenced.lock.internal.redis;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * A Lua script loaded once from a resource next to this class, with its SHA1 for {@code EVALSHA}.
 *
 * @param name the resource name, for messages
 * @param source the script
 * @param sha1 the lower-case hex SHA1 of the script, as Redis computes it
 */
record LuaScript(String name, String source, String sha1) {

    static final LuaScript ACQUIRE = load("acquire.lua");
    static final LuaScript RENEW = load("renew.lua");
    static final LuaScript RELEASE = load("release.lua");
    static final LuaScript RENEW_ON_NODE = load("renew-node.lua");
    static final LuaScript INSPECT = load("inspect.lua");
    static final LuaScript FORCE_RELEASE = load("force-release.lua");

    static LuaScript load(String resource) {
        try (InputStream in = LuaScript.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new IllegalStateException("Missing script resource " + resource);
            }
            String source = new String(in.readAllBytes(), StandardCharsets.UTF_8);
            byte[] digest = MessageDigest.getInstance("SHA-1").digest(source.getBytes(StandardCharsets.UTF_8));
            return new LuaScript(resource, source, HexFormat.of().formatHex(digest));
        } catch (IOException e) {
            throw new UncheckedIOException("Cannot read script resource " + resource, e);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-1 is not available", e);
        }
    }
}
