-- Takes a lock and mints its fencing token in one atomic step.
-- KEYS[1] lock key (value "owner:token", expires with the lease)
-- KEYS[2] token counter key (never expires)
-- ARGV[1] owner id, ARGV[2] lease time in ms, ARGV[3] floor: the next token must exceed it (0 = none),
-- ARGV[4] '1' for server-time tokens: the next token is at least the server's TIME in microseconds
-- ARGV[5], ARGV[6] (a hand-off, optional) the owner id and token of a lease of the same client that releases the
--   lock to this owner: a lock that holds that lease counts as free, and is taken over without a notification
-- Returns {1, token, released} when the owner holds the lock, {0, holder's remaining ms, released} otherwise;
-- released is 1 when a hand-off's releasing lease held the lock, else 0.
local current = redis.call('GET', KEYS[1])
local released = 0
if ARGV[5] and current == ARGV[5] .. ':' .. ARGV[6] then
  released = 1
  current = false
end
if current then
  local mine = ARGV[1] .. ':'
  if string.sub(current, 1, #mine) == mine then
    -- A retried acquire of the same owner: keep its token, refresh the lease.
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, tonumber(string.sub(current, #mine + 1)), released}
  end
  return {0, redis.call('PTTL', KEYS[1]), released}
end
-- A floor is a token storage has seen that this counter may no longer know of (data loss): move past it.
local token = math.max(tonumber(redis.call('GET', KEYS[2]) or '0') or 0, tonumber(ARGV[3])) + 1
if ARGV[4] == '1' then
  -- After the counter is lost, time still moves on: the next token stays above every earlier one.
  -- Writes after TIME replicate as effects (the default from Redis 5; a no-op call on Redis 7).
  if redis.replicate_commands then
    redis.replicate_commands()
  end
  local now = redis.call('TIME')
  token = math.max(token, tonumber(now[1]) * 1000000 + tonumber(now[2]))
end
-- %d, not Lua's default number format, which turns large tokens into '1e+14'.
local value = string.format('%d', token)
redis.call('SET', KEYS[2], value)
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. value, 'PX', ARGV[2])
return {1, token, released}
