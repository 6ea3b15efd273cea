package dev.fenced.lock.internal.redis;

import io.lettuce.core.codec.RedisCodec;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.codec.ToByteBufEncoder;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import java.nio.ByteBuffer;
import org.jspecify.annotations.Nullable;

/**
 * Strings as UTF-8, as Lettuce's {@link StringCodec#UTF8}, written straight into the command's buffer. Lettuce writes
 * a key or value of an encoder whose size estimate is exact directly into the command; for one whose estimate is
 * only an upper bound, which {@code StringCodec.UTF8}'s is (three bytes a char), it allocates a buffer per argument,
 * encodes into it and copies it over. A lock script carries several keys and arguments per lock, so that was one
 * pooled buffer per argument (each also sampled by Netty's leak detector, which records a stack trace for one
 * buffer in 128). This codec's estimate is the exact UTF-8 length ({@link ByteBufUtil#utf8Bytes}, which counts
 * what {@link ByteBufUtil#writeUtf8} writes: the bytes {@code StringCodec.UTF8} writes, which calls the same method).
 * A string with an unpaired surrogate has no UTF-8 form (Netty writes a {@code '?'} for it and may drop a byte of
 * the next character, so two such strings can be one key): the client refuses such names, patterns and labels
 * before any command. Decoding and the {@link ByteBuffer} encodings (which Lettuce uses to route keys on a cluster) are
 * {@code StringCodec.UTF8}'s. Stateless and thread-safe.
 */
final class Utf8Codec implements RedisCodec<String, String>, ToByteBufEncoder<String, String> {

    /** The instance. */
    static final Utf8Codec UTF8 = new Utf8Codec();

    private static final StringCodec STRINGS = StringCodec.UTF8;

    private Utf8Codec() {
    }

    @Override
    public String decodeKey(ByteBuffer bytes) {
        return STRINGS.decodeKey(bytes);
    }

    @Override
    public String decodeValue(ByteBuffer bytes) {
        return STRINGS.decodeValue(bytes);
    }

    @Override
    public ByteBuffer encodeKey(String key) {
        return STRINGS.encodeKey(key);
    }

    @Override
    public ByteBuffer encodeValue(String value) {
        return STRINGS.encodeValue(value);
    }

    @Override
    public void encodeKey(@Nullable String key, ByteBuf target) {
        write(key, target);
    }

    @Override
    public void encodeValue(@Nullable String value, ByteBuf target) {
        write(value, target);
    }

    @Override
    public int estimateSize(@Nullable Object keyOrValue) {
        return keyOrValue instanceof CharSequence s ? ByteBufUtil.utf8Bytes(s) : 0;
    }

    @Override
    public boolean isEstimateExact() {
        return true;
    }

    private static void write(@Nullable String s, ByteBuf target) {
        if (s != null) {
            ByteBufUtil.writeUtf8(target, s);
        }
    }
}
