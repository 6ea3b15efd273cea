-- Deletes a lock if it holds the caller's lease, then notifies waiters.
-- KEYS[1] lock key
-- ARGV[1] owner id, ARGV[2] token ('' matches any token of the owner), ARGV[3] release channel,
-- ARGV[4] '1' on a cluster: notify with sharded pub/sub (SPUBLISH) if the server has it, else PUBLISH
-- Returns 1 if deleted, 0 if the lock does not hold this lease.
local current = redis.call('GET', KEYS[1])
if not current then
  return 0
end
local matches
if ARGV[2] == '' then
  local mine = ARGV[1] .. ':'
  matches = string.sub(current, 1, #mine) == mine
else
  matches = current == ARGV[1] .. ':' .. ARGV[2]
end
if not matches then
  return 0
end
redis.call('DEL', KEYS[1])
-- On a cluster, sharded pub/sub where the server has it (Redis 7 and later), else plain: the server, not what
-- a client could read of it, decides, so every client of the prefix agrees with the subscribers' SSUBSCRIBE.
if ARGV[4] ~= '1' or not pcall(redis.call, 'SPUBLISH', ARGV[3], current) then
  redis.call('PUBLISH', ARGV[3], current)
end
return 1
