#!lua flags=allow-cross-slot-keys
-- Extends leases of locks in several slots served by one Redis Cluster node (Redis 7 or later), in one call.
-- KEYS[1] the lock key of the first lease: it routes the call to its node (it is ARGV[3] too)
-- For lease i: ARGV[3i-2] its lease time in ms, ARGV[3i-1] its expected value "owner:token", ARGV[3i] its lock key
-- Returns one integer per lease: 1 extended, 0 held by another value, 2 missing. A missing key has
-- expired, or a reshard has moved its slot away: the caller asks again through the key's own slot.
local result = {}
local n = #ARGV / 3
for i = 1, n do
  local current = redis.call('GET', ARGV[3 * i])
  if current == ARGV[3 * i - 1] then
    redis.call('PEXPIRE', ARGV[3 * i], ARGV[3 * i - 2])
    result[i] = 1
  elseif current then
    result[i] = 0
  else
    result[i] = 2
  end
end
return result
