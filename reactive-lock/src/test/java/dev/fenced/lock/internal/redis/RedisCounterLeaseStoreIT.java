package dev.fenced.lock.internal.redis;

import dev.fenced.lock.TokenScheme;

/** The store contract on Redis with consecutive counter tokens. */
class RedisCounterLeaseStoreIT extends RedisLeaseStoreIT {

    @Override
    TokenScheme scheme() {
        return TokenScheme.COUNTER;
    }
}
