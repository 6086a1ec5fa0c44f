-- pfreeze.lua: freeze one shard of a sharded pre-queue at the start (queue/prequeue.go runs
-- it on every shard, then freezeall.lua on the queue's slot). From here on the shard takes
-- no entry (pjoin.lua answers QUEUE_SLOT: a join goes to the queue's line, behind the draw).
-- Idempotent: a second call changes nothing and answers the same.
-- KEYS[1] pcfg  KEYS[2] pre  KEYS[3] drawset (the shard's frozen entries)
-- Returns {entries frozen, joins counted by the shard}.
if redis.call('HGET', KEYS[1], 'frozen') ~= '1' then
  redis.call('HSET', KEYS[1], 'frozen', '1')
  if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('RENAME', KEYS[2], KEYS[3]) end
end
return {redis.call('ZCARD', KEYS[3]), tonumber(redis.call('HGET', KEYS[1], 'joins') or '0') or 0}
