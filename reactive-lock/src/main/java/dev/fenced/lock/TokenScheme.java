package dev.fenced.lock;

/**
 * How the lock service mints fencing tokens. Either way a token is minted in the same atomic step that
 * takes the lock, and tokens strictly increase per lock name for as long as the service keeps the lock's
 * token counter.
 *
 * <p>They differ in what happens when the service <em>loses</em> the counter (a Redis restart without
 * persistence, {@code FLUSHALL}, a failover to a replica that missed the latest increments): then a stale
 * holder may still carry a token above the ones the service issues next.
 */
public enum TokenScheme {

    /**
     * The default: the next token is {@code max(counter + 1, server time in microseconds)}, with the time read
     * by Redis's {@code TIME} inside the acquire script. After the counter is lost, the next token is still
     * above every token issued before, unless the server that now answers has a clock behind the one that
     * issued the earlier token by more than the time between the two grants. Tokens are positive and below
     * 2<sup>53</sup> (until the year 2255), so they fit a signed 64-bit column and stay exact in JSON numbers.
     */
    SERVER_TIME,

    /**
     * Consecutive tokens {@code 1, 2, 3, ...} from the counter alone. After the counter is lost, tokens start
     * again from 1 (or from the highest token storage reported, see
     * {@link FencedLease#reportRejectedWrite(StaleFencingTokenException)}), so for up to one renewal period a
     * stale holder's writes can be accepted over the new holder's, until the storage rejects one of them.
     * Use it only where tokens must be small and dense and the counter cannot be lost (persistence with
     * {@code appendfsync always}, no failover).
     */
    COUNTER
}
