import dev.fenced.lock.FencedLockClient;
import reactor.core.publisher.Mono;

public class QuickStart {
    public static void main(String[] args) {
        String redis = args.length > 0 ? args[0] : "redis://127.0.0.1:6379";
        try (FencedLockClient locks = FencedLockClient.builder().redisUri(redis).build()) {
            String receipt = locks.withLease("invoice:42", lease ->
                            // Carry lease.token() with every write this lease protects.
                            Mono.fromCallable(() -> "invoice 42 settled with fencing token " + lease.token()))
                    .blockLast();
            System.out.println(receipt);
        }
    }
}
