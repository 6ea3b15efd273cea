-- Takes locks and mints their fencing tokens: each lock in one atomic step, several locks in one call.
-- KEYS[3i-2] the lock key of lock i (value "owner:token", expires with the lease)
-- KEYS[3i-1] its token counter key (never expires)
-- KEYS[3i] its holder key (lock key .. ':holder', same hash tag): declared even when no label is written, so that
--   Redis Cluster routes, redirects (ASK) and refuses (TRYAGAIN) the call by every key it may write during a reshard
-- ARGV[1] '1' for server-time tokens: the next token is at least the server's TIME in microseconds
-- ARGV[2], ARGV[3] a hand-off ('' when none; then one lock only): the owner id and token of a lease of the same
--   client that releases lock 1 to its owner: a lock that holds that lease counts as free, and is taken over
--   without a notification
-- ARGV[3i+1], ARGV[3i+2], ARGV[3i+3] the owner id of lock i, its lease time in ms and its floor: its next token
--   must exceed the floor (0 = none)
-- ARGV[3n+4] (n locks) the holder label of the acquiring client, absent when it stores none: a grant writes
--   "token label" to the lock's holder key, one write per grant, never on renewal; the fleet view shows the label
--   only while the lock holds that token
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
local label = ARGV[3 * (#KEYS / 3) + 4]

-- Lock i was just granted with token value: records who holds it, when the client has a label.
local function labelled(i, value)
  if label then
    redis.call('SET', KEYS[3 * i], value .. ' ' .. label)
  end
end

-- Lock i found taken: a retried acquire of the same owner keeps its token and refreshes the lease; another
-- owner's lock answers its remaining time.
local function taken(lock, owner, lease, current)
  local mine = owner .. ':'
  if string.sub(current, 1, #mine) == mine then
    local token = tonumber(string.sub(current, #mine + 1))
    if not token then
      error('the lock holds ' .. current .. ', not owner:token')
    end
    redis.call('PEXPIRE', lock, lease)
    return 1, token
  end
  return 0, redis.call('PTTL', lock)
end

-- Whether lock i holds the lease a hand-off releases (only lock 1 of a call may be handed off).
local function handedOff(i, current)
  return i == 1 and ARGV[2] ~= '' and current == ARGV[2] .. ':' .. ARGV[3]
end

-- Reads the lock, then mints the token from the counter: four commands for a free lock.
local function readingFirst(i)
  local lock, counter = KEYS[3 * i - 2], KEYS[3 * i - 1]
  local owner, lease = ARGV[3 * i + 1], ARGV[3 * i + 2]
  local current = redis.call('GET', lock)
  if handedOff(i, current) then
    released = 1
    current = false
  end
  if current then
    return taken(lock, owner, lease, current)
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
  labelled(i, value)
  return 1, token
end

-- Server-time tokens on Redis 7 and later: mints the token first, then sets the lock only if it is free
-- (SET NX GET), two commands for a free lock. A lock found taken has moved its counter up to the server time,
-- which every later token exceeds anyway: the counter only bounds tokens from below.
local function mintingFirst(i)
  local lock, counter = KEYS[3 * i - 2], KEYS[3 * i - 1]
  local owner, lease = ARGV[3 * i + 1], ARGV[3 * i + 2]
  local token = math.max(tonumber(ARGV[3 * i + 3]) + 1, now)
  local old = tonumber(redis.call('SET', counter, string.format('%d', token), 'GET') or '0') or 0
  if old >= token then
    token = old + 1
    redis.call('SET', counter, string.format('%d', token))
  end
  local value = owner .. ':' .. string.format('%d', token)
  local current = redis.call('SET', lock, value, 'NX', 'PX', lease, 'GET')
  if not current then
    labelled(i, string.format('%d', token))
    return 1, token
  end
  if handedOff(i, current) then
    released = 1
    redis.call('SET', lock, value, 'PX', lease)
    labelled(i, string.format('%d', token))
    return 1, token
  end
  return taken(lock, owner, lease, current)
end

local acquire = readingFirst
if now and redis.REDIS_VERSION_NUM and redis.REDIS_VERSION_NUM >= 0x070000 then
  acquire = mintingFirst
end

local result = {}
for i = 1, #KEYS / 3 do
  local ok, held, value = pcall(acquire, i)
  if ok then
    result[2 * i - 1], result[2 * i] = held, value
  else
    result[2 * i - 1], result[2 * i] = -1, type(held) == 'table' and tostring(held.err) or tostring(held)
  end
end
result[#result + 1] = released
return result
