package dev.fenced.lock.internal.redis;

import static org.assertj.core.api.Assertions.assertThat;

import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.protocol.CommandArgs;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** The codec writes exactly the bytes Lettuce's UTF-8 string codec writes, without a buffer per argument. */
class Utf8CodecTest {

    static List<String> strings() {
        return List.of("", "account-42", "fenced:{invoice:7}:fence", "ключ-замка", "日本語のロック", "lock 🔒 with a pair",
                "é".repeat(1024), "ascii then \u00ff and \u07ff and \u0800 and \uffff",
                "unpaired high \uD800 here", "unpaired low \uDC00 here", "high at the end \uD83D");
    }

    @ParameterizedTest
    @MethodSource("strings")
    void theEstimateIsTheNumberOfBytesWrittenAndTheBytesAreUtf8(String s) {
        ByteBuf written = Unpooled.buffer();
        Utf8Codec.UTF8.encodeValue(s, written);
        assertThat(Utf8Codec.UTF8.estimateSize(s)).isEqualTo(written.readableBytes());
        ByteBuffer lettuce = StringCodec.UTF8.encodeValue(s);
        assertThat(ByteBufUtil.getBytes(written)).isEqualTo(toArray(lettuce));
        assertThat(ByteBufUtil.getBytes(written)).isEqualTo(s.getBytes(StandardCharsets.UTF_8));
        assertThat(Utf8Codec.UTF8.decodeValue(ByteBuffer.wrap(ByteBufUtil.getBytes(written))))
                .isEqualTo(StringCodec.UTF8.decodeValue(ByteBuffer.wrap(s.getBytes(StandardCharsets.UTF_8))));
    }

    @ParameterizedTest
    @MethodSource("strings")
    void aCommandIsEncodedToTheSameProtocolBytesAsWithLettucesCodec(String s) {
        ByteBuf mine = Unpooled.buffer();
        ByteBuf lettuces = Unpooled.buffer();
        new CommandArgs<>(Utf8Codec.UTF8).add("digest").add(2).addKeys(s, "k-" + s).addValues(s, "1", "").encode(mine);
        new CommandArgs<>(StringCodec.UTF8).add("digest").add(2).addKeys(s, "k-" + s).addValues(s, "1", "").encode(lettuces);
        assertThat(ByteBufUtil.getBytes(mine)).isEqualTo(ByteBufUtil.getBytes(lettuces));
        assertThat(Utf8Codec.UTF8.encodeKey(s)).isEqualTo(StringCodec.UTF8.encodeKey(s));
    }

    @org.junit.jupiter.api.Test
    void aNullIsWrittenAsNothing() {
        ByteBuf written = Unpooled.buffer();
        Utf8Codec.UTF8.encodeKey(null, written);
        assertThat(written.readableBytes()).isZero();
        assertThat(Utf8Codec.UTF8.estimateSize(null)).isZero();
        assertThat(Utf8Codec.UTF8.isEstimateExact()).isTrue();
    }

    private static byte[] toArray(ByteBuffer buffer) {
        byte[] bytes = new byte[buffer.remaining()];
        buffer.duplicate().get(bytes);
        return bytes;
    }
}
