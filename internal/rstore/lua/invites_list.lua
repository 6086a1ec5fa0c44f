-- invites_list.lua: drop expired codes and return the rest.
-- KEYS[1] cfg   KEYS[2] invites   KEYS[3] invitexp
-- Returns {now, code, value, code, value, …}, or {-1} for an unknown queue.
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for _, code in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 10000)) do
  redis.call('HDEL', KEYS[2], code)
  redis.call('ZREM', KEYS[3], code)
end
local out = {now}
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all do out[#out + 1] = all[i] end
return out
