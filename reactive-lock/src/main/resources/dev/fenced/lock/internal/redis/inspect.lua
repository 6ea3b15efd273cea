-- Reads locks for the fleet view: the holder's token, its remaining time by the server's clock and its holder
-- label. Never the owner id, which is a capability: only the digits after the last ':' of the lock's value leave.
-- KEYS[2i-1] the lock key of lock i, KEYS[2i] its holder key
-- Returns three values per lock: its token as a string ('' when free, or when the key is not a lock), its
-- remaining time in ms (PTTL), and its holder label ('' when none was written for this token).
local result = {}
local function inspect(i)
  local value = redis.call('GET', KEYS[2 * i - 1])
  if not value then
    return '', -2, ''
  end
  local token = string.match(value, ':(%d+)$')
  if not token then
    return '', -2, ''
  end
  local ttl = redis.call('PTTL', KEYS[2 * i - 1])
  local label = ''
  local holder = redis.call('GET', KEYS[2 * i])
  if holder and string.sub(holder, 1, #token + 1) == token .. ' ' then
    label = string.sub(holder, #token + 2)
  end
  return token, ttl, label
end
for i = 1, #KEYS / 2 do
  -- A key of another type under the prefix is not a lock: skip it rather than fail the whole page.
  local ok, token, ttl, label = pcall(inspect, i)
  if not ok then
    token, ttl, label = '', -2, ''
  end
  result[3 * i - 2], result[3 * i - 1], result[3 * i] = token, ttl, label
end
return result
