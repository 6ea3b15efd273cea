-- Deletes locks that hold the caller's leases, then notifies their waiters (best effort): several leases in one call.
-- KEYS[i] the lock key of lease i
-- ARGV[1] '1' on a cluster: notify with sharded pub/sub (SPUBLISH) if the server has it, else PUBLISH
-- ARGV[3i-1], ARGV[3i], ARGV[3i+1] the owner id of lease i, its token ('' matches any token of the owner) and its
--   lock's release channel
-- Returns one value per lease: 1 if deleted, 0 if its lock does not hold it, an error message when a command
-- failed for this lease alone (the others are answered as usual).
local function release(i)
  local owner, token, channel = ARGV[3 * i - 1], ARGV[3 * i], ARGV[3 * i + 1]
  local current = redis.call('GET', KEYS[i])
  if not current then
    return 0
  end
  local matches
  if token == '' then
    local mine = owner .. ':'
    matches = string.sub(current, 1, #mine) == mine
  else
    matches = current == owner .. ':' .. token
  end
  if not matches then
    return 0
  end
  redis.call('DEL', KEYS[i])
  -- The notification is best effort (waiters also have timers): once the lock is deleted the release succeeded,
  -- even if this user may not publish to the channel (an ACL without it).
  -- On a cluster, sharded pub/sub where the server has it (Redis 7 and later), else plain: the server, not what
  -- a client could read of it, decides, so every client of the prefix agrees with the subscribers' SSUBSCRIBE.
  if ARGV[1] ~= '1' or not pcall(redis.call, 'SPUBLISH', channel, current) then
    pcall(redis.call, 'PUBLISH', channel, current)
  end
  return 1
end

local result = {}
for i = 1, #KEYS do
  local ok, deleted = pcall(release, i)
  if ok then
    result[i] = deleted
  else
    result[i] = type(deleted) == 'table' and tostring(deleted.err) or tostring(deleted)
  end
end
return result
