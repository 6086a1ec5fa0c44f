-- soldout.lua: mark a queue sold out or not, and log its sold-out periods (the report reads
-- them; admission reads only sold_out).
-- KEYS[1] cfg     HASH  sold_out, sold_out_v (the version of the judgement it holds)
-- KEYS[2] soldlog LIST  one entry per period, oldest first: "<from ms>" while it lasts,
--                       "<from ms>:<to ms>" once restocked; the last 64 periods are kept
-- ARGV[1] "1" sold out, "0" not
-- ARGV[2] the judgement's version (orders.QueueStock); "0": none (tests, tools), written
--         whatever the flag holds
-- Returns 0 when the queue does not exist (nothing written: HSET would make a stray hash),
-- 1 when the flag did not change (or the judgement is not newer than the one it holds), 2
-- when it did. Time from Redis TIME.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local version = tonumber(ARGV[2]) or 0
if version > 0 then
  if version <= (tonumber(redis.call('HGET', KEYS[1], 'sold_out_v')) or 0) then return 1 end
  redis.call('HSET', KEYS[1], 'sold_out_v', ARGV[2])
end
local cur = redis.call('HGET', KEYS[1], 'sold_out') == '1'
local want = ARGV[1] == '1'
if cur == want then return 1 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 'sold_out', want and '1' or '0')
local last = redis.call('LINDEX', KEYS[2], -1)
if want then
  redis.call('RPUSH', KEYS[2], now)
  redis.call('LTRIM', KEYS[2], -64, -1)
elseif last and not string.find(last, ':', 1, true) then
  -- (No open period: the flag was set by a release without this log; nothing to end.)
  redis.call('LSET', KEYS[2], -1, last .. ':' .. now)
end
return 2
