package dev.fenced.lock.internal.postgres;

import dev.fenced.lock.TokenScheme;

/** The store contract on PostgreSQL with consecutive counter tokens. */
class PostgresCounterLeaseStoreIT extends PostgresLeaseStoreIT {

    @Override
    TokenScheme scheme() {
        return TokenScheme.COUNTER;
    }
}
