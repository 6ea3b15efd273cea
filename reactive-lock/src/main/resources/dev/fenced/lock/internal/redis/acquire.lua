-- Takes locks and mints their fencing tokens: each lock in one atomic step, several locks in one call.
-- KEYS[2i-1] the lock key of lock i (value "owner:token", expires with the lease)
-- KEYS[2i] its token counter key (never expires)
-- ARGV[1] '1' for server-time tokens: the next token is at least the server's TIME in microseconds
-- ARGV[2], ARGV[3] a hand-off ('' when none; then one lock only): the owner id and token of a lease of the same
--   client that releases lock 1 to its owner: a lock that holds that lease counts as free, and is taken over
--   without a notification
-- ARGV[3i+1], ARGV[3i+2], ARGV[3i+3] the owner id of lock i, its lease time in ms and its floor: its next token
--   must exceed the floor (0 = none)
-- Returns two values per lock, then one: {1, token} when the owner holds lock i, {0, holder's remaining ms}
-- otherwise, {-1, error message} when a command failed for lock i alone (a key of another type, say: the other
-- locks are answered as usual); last, 1 when a hand-off's releasing lease held lock 1, else 0.
local now
if ARGV[1] == '1' then
  -- After the counter is lost, time still moves on: the next token stays above every earlier one. Writes after
  -- TIME replicate as effects (the default from Redis 5; a no-op call on Redis 7), asked for before any write.
  if redis.replicate_commands then
    redis.replicate_commands()
  end
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
end
local released = 0

local function acquire(i)
  local lock, counter = KEYS[2 * i - 1], KEYS[2 * i]
  local owner, lease = ARGV[3 * i + 1], ARGV[3 * i + 2]
  local current = redis.call('GET', lock)
  if i == 1 and ARGV[2] ~= '' and current == ARGV[2] .. ':' .. ARGV[3] then
    released = 1
    current = false
  end
  if current then
    local mine = owner .. ':'
    if string.sub(current, 1, #mine) == mine then
      -- A retried acquire of the same owner: keep its token, refresh the lease.
      local token = tonumber(string.sub(current, #mine + 1))
      if not token then
        error('the lock holds ' .. current .. ', not owner:token')
      end
      redis.call('PEXPIRE', lock, lease)
      return 1, token
    end
    return 0, redis.call('PTTL', lock)
  end
  -- A floor is a token storage has seen that this counter may no longer know of (data loss): move past it.
  -- A counter that is not a number counts as 0.
  local token = math.max(tonumber(redis.call('GET', counter) or '0') or 0, tonumber(ARGV[3 * i + 3])) + 1
  if now then
    token = math.max(token, now)
  end
  -- %d, not Lua's default number format, which turns large tokens into '1e+14'.
  local value = string.format('%d', token)
  redis.call('SET', counter, value)
  redis.call('SET', lock, owner .. ':' .. value, 'PX', lease)
  return 1, token
end

local result = {}
for i = 1, #KEYS / 2 do
  local ok, held, value = pcall(acquire, i)
  if ok then
    result[2 * i - 1], result[2 * i] = held, value
  else
    result[2 * i - 1], result[2 * i] = -1, type(held) == 'table' and tostring(held.err) or tostring(held)
  end
end
result[#result + 1] = released
return result
