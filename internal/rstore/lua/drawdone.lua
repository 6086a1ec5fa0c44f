-- drawdone.lua: finish the draw: store the drawn order, reveal the seed (GET …/draw shows it
-- from now on) and let admission start.
-- KEYS[1] lease  KEYS[2] fence  KEYS[3] cfg  KEYS[4] draw  KEYS[5] draworder
-- ARGV[1] owner  ARGV[2] fencing token  ARGV[3] the drawn order (raw 32-byte draw ids)
-- ARGV[4] the participants hash
-- Returns 1, or -1 when fenced off.
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return -1
end
if redis.call('HGET', KEYS[3], 'draw') ~= 'f' then return 1 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', KEYS[5], ARGV[3])
redis.call('HSET', KEYS[4], 'phash', ARGV[4], 'done_ms', now)
redis.call('HSET', KEYS[3], 'draw', 'd')
return 1
