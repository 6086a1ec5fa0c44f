-- freezeall.lua: the start of a sharded pre-queue, on the queue's own slot, once every other
-- shard is frozen (pfreeze.lua): the queue's own pre-queue is frozen as freeze.lua does, and
-- the sequences reserved for the draw are this slot's entries plus the other shards'.
-- KEYS[1] cfg  KEYS[2] seq  KEYS[3] pre  KEYS[4] drawset  KEYS[5] draw  KEYS[6] clock
-- ARGV[1] the other shards' frozen entries, in all   ARGV[2] their joins, in all
-- ARGV[3] per shard, "tag=entries" comma-separated (kept in the draw record: shards)
-- Returns 1 frozen now, 0 frozen before (or not scheduled), -1 the start has not come.
local cf = redis.call('HMGET', KEYS[1], 'draw', 'starts_ms')
if cf[1] ~= PHASE_SCHEDULED then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < (tonumber(cf[2] or '0') or 0) then return -1 end
freeze(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], now, tonumber(ARGV[1]) or 0)
redis.call('HSET', KEYS[5], 'shards', ARGV[3])
-- The queue's joined total (history) counts the other shards' joins from now on.
local j = tonumber(ARGV[2]) or 0
if j > 0 then redis.call('HINCRBY', KEYS[6], 'joins', j) end
return 1
