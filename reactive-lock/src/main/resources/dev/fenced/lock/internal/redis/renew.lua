-- Extends every lease whose lock still holds its exact "owner:token" value.
-- KEYS[i] lock key of lease i
-- ARGV[2i-1] its lease time in ms, ARGV[2i] its expected value "owner:token"
-- Returns one integer per lease: 1 extended, 0 not held.
local result = {}
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[2 * i] then
    redis.call('PEXPIRE', KEYS[i], ARGV[2 * i - 1])
    result[i] = 1
  else
    result[i] = 0
  end
end
return result
