-- schedule.lua: set or change a queue's start (starts_at), atomically with the checks of
-- the contract, so a join cannot slip between the check and the change.
-- KEYS[1] cfg  KEYS[2] waiting  KEYS[3] waiting:p  KEYS[4] waiting:b
-- KEYS[5] draw  KEYS[6] pre  KEYS[7] drawset  KEYS[8] draworder
-- ARGV[1] the new start, Unix ms ("" = none)  ARGV[2] a fresh secret seed (hex)
-- ARGV[3] its commitment (hex SHA-256 of the seed's bytes)
-- ARGV[4] the tags of the other shards of the pre-queue, comma-separated ("" = one shard,
--         the queue's own slot; queue/prequeue.go). Fixed when the start is first set: a
--         change of the start keeps them.
-- Returns {code, phase}: 0 unchanged, 1 set, 2 cleared on a scheduled queue (the sale
-- starts now: its draw is due), -1 the draw has begun or is done (draw_done), -2 people
-- are waiting in an unscheduled queue (queue_not_empty).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cf = redis.call('HMGET', KEYS[1], 'draw', 'starts_ms')
local phase, cur = cf[1] or '', cf[2] or ''
if cur == '0' then cur = '' end
if ARGV[1] == cur then return {0, phase} end
if phase == 'f' or phase == 'd' then return {-1, phase} end
if phase == 's' then
  if now >= tonumber(cur) then return {-1, phase} end -- started: the draw is due at once
  if ARGV[1] == '' then
    redis.call('HSET', KEYS[1], 'starts_ms', now)
    return {2, phase}
  end
  redis.call('HSET', KEYS[1], 'starts_ms', ARGV[1])
  return {1, phase}
end
if ARGV[1] == '' then return {0, phase} end
if redis.call('ZCARD', KEYS[2]) + redis.call('ZCARD', KEYS[3]) + redis.call('ZCARD', KEYS[4]) > 0 then
  return {-2, phase}
end
redis.call('DEL', KEYS[5], KEYS[6], KEYS[7], KEYS[8])
redis.call('HSET', KEYS[5], 'seed', ARGV[2], 'commitment', ARGV[3], 'joins', 0)
redis.call('HSET', KEYS[1], 'starts_ms', ARGV[1], 'draw', 's')
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], 'pq_tags', ARGV[4], 'pq_other', 0)
else
  redis.call('HDEL', KEYS[1], 'pq_tags', 'pq_other')
end
return {1, 's'}
