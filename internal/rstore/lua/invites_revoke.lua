-- invites_revoke.lua: deletes one code.
-- KEYS[1] cfg   KEYS[2] invites   KEYS[3] invitexp   ARGV[1] code
-- Returns 1 revoked, 0 no live code of that name, -1 unknown queue.
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local v = redis.call('HGET', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if not v then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = tonumber(string.match(v, '^%a:%d+:(%d+)') or '0')
if exp <= now then return 0 end
return 1
