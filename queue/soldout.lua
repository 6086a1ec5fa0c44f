-- soldout.lua: mark a queue sold out or not, and keep when its sold-out periods began and
-- ended (the report reads them; admission reads only sold_out).
-- KEYS[1] cfg  HASH  sold_out, so_since (ms: the latest period's start), so_until (ms: its end)
-- ARGV[1] "1" sold out, "0" not
-- Returns 0 when the queue does not exist (nothing written: HSET would make a stray hash),
-- 1 when the flag did not change, 2 when it did. Time from Redis TIME.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local cur = redis.call('HGET', KEYS[1], 'sold_out') == '1'
local want = ARGV[1] == '1'
if cur == want then return 1 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if want then
  redis.call('HSET', KEYS[1], 'sold_out', '1', 'so_since', now)
  redis.call('HDEL', KEYS[1], 'so_until')
else
  redis.call('HSET', KEYS[1], 'sold_out', '0', 'so_until', now)
end
return 2
