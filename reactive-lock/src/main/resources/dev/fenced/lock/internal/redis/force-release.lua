-- Breaks a lock, whoever holds it (fenced force-release), in one atomic step: deletes the lock and leaves its token
-- counter at least at the broken token, so that the next grant's token is above it whether tokens come from the
-- counter or from the server's time (both take counter + 1 at least). The broken holder's renewals and release
-- compare "owner:token" and find nothing. Idempotent: a free lock changes nothing; with an expected token, neither
-- does a lock that holds another one.
-- KEYS[1] the lock key, KEYS[2] its token counter key, KEYS[3] its holder key
-- ARGV[1] '1' on a cluster: notify with sharded pub/sub (SPUBLISH) if the server has it, else PUBLISH
-- ARGV[2] the lock's release channel
-- ARGV[3] the token to break ('' for whichever the lock holds): a lock that holds another token is left alone
-- Returns {1, broken token as a string, its holder label or ''} when a lock was broken, {0, '', ''} when none was
-- held. Never the owner id.
local current = redis.call('GET', KEYS[1])
if not current then
  return {0, '', ''}
end
local token = string.match(current, ':(%d+)$')
if not token then
  return redis.error_reply('the lock key does not hold owner:token')
end
if ARGV[3] ~= '' and token ~= ARGV[3] then
  return {0, '', ''}
end
-- Tokens stay below 2^53 (microseconds since 1970 for centuries), so Lua's numbers compare them exactly.
if (tonumber(redis.call('GET', KEYS[2]) or '0') or 0) < tonumber(token) then
  redis.call('SET', KEYS[2], token)
end
redis.call('DEL', KEYS[1])
local label = ''
local ok, holder = pcall(redis.call, 'GET', KEYS[3])
if ok and holder and string.sub(holder, 1, #token + 1) == token .. ' ' then
  label = string.sub(holder, #token + 2)
end
redis.call('DEL', KEYS[3])
-- Best effort, as in release.lua: waiters also have timers.
if ARGV[1] ~= '1' or not pcall(redis.call, 'SPUBLISH', ARGV[2], token) then
  pcall(redis.call, 'PUBLISH', ARGV[2], token)
end
return {1, token, label}
