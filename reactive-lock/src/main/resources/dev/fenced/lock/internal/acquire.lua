-- Takes a lock and mints its fencing token in one atomic step.
-- KEYS[1] lock key (value "owner:token", expires with the lease)
-- KEYS[2] token counter key (never expires)
-- ARGV[1] owner id, ARGV[2] lease time in ms, ARGV[3] floor: the next token must exceed it (0 = none)
-- Returns {1, token} when the owner holds the lock, {0, holder's remaining ms} otherwise.
local current = redis.call('GET', KEYS[1])
if current then
  local mine = ARGV[1] .. ':'
  if string.sub(current, 1, #mine) == mine then
    -- A retried acquire of the same owner: keep its token, refresh the lease.
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, tonumber(string.sub(current, #mine + 1))}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
local floor = tonumber(ARGV[3])
if floor > 0 then
  local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
  if counter < floor then
    -- Storage has seen a token Redis no longer knows of (data loss): move past it.
    redis.call('SET', KEYS[2], ARGV[3])
  end
end
local token = redis.call('INCR', KEYS[2])
-- %d, not Lua's default number format, which turns large tokens into '1e+14'.
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. string.format('%d', token), 'PX', ARGV[2])
return {1, token}
