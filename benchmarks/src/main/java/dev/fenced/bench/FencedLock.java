package dev.fenced.bench;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import reactor.core.publisher.Mono;

/** Fenced, used as an application would: acquire (default options), then release. */
final class FencedLock implements LockUnderTest {

    private final FencedLockClient client;

    FencedLock(String redisUri, String prefix) {
        this.client = FencedLockClient.builder().redisUri(redisUri).keyPrefix(prefix).build();
    }

    FencedLockClient client() {
        return client;
    }

    @Override
    public String label() {
        return "Fenced";
    }

    @Override
    public Mono<Void> pair(String name) {
        return client.acquire(name).flatMap(FencedLease::release).then();
    }

    @Override
    public void close() {
        client.close();
    }
}
