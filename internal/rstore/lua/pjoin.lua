-- pjoin.lua: a join (or a status read) in one shard of a sharded pre-queue (queue/prequeue.go),
-- touching only that shard's slot. The entry's row is here until the draw moves it to the
-- queue's line; everything else about the queue is the shard's copy of its settings.
-- KEYS[1] pcfg     HASH  the shard: the queue settings a join reads, copied by the leader
--                        (closed, rate, paused, places_per_ip, pow_difficulty, priority_share,
--                        method, sold_out, ended, starts_ms, max_active, ends_ms,
--                        max_active_share_per_ip, draw), pq_total (the whole pre-queue's
--                        size at the leader's last count), frozen ('1' from the start on),
--                        joins (this shard's join counter)
-- KEYS[2] tickets  HASH  ticket -> 'q:<join number>:<client address key>' (an entry), or
--                        'm:<sequence>:<client address key>' (moved to the line by the draw)
-- KEYS[3] pre      ZSET  the shard's entries: ticket -> join number
-- KEYS[4] places   ZSET  the places of one client address in this shard (as join.lua's)
-- KEYS[5] pow      STRING the single-use record of the presented proof-of-work challenge
-- ARGV[1] ticket id   ARGV[2] JOIN '1' or STATUS '0'   ARGV[3] client address key ("" = not
-- capped)   ARGV[4] difficulty of the verified proof ("" = none)   ARGV[5] its expiry (ms)
--
-- Answers what join.lua answers for a pre-queue place (cjson), or a refusal named as
-- join.lua's (CLOSED, ENDED, NOT_OPEN, SOLD_OUT, POW_*, TOO_MANY_PLACES), or
-- QUEUE_SLOT (not MOVED: a client reads that as a cluster's redirection): the queue's own slot answers for this ticket (no copy of the settings here, the
-- shard frozen, the start passed) — the caller runs join.lua there; IN_LINE: the draw
-- took the entry to the line (the caller only reads its place there: join.lua never makes a
-- second one while the draw is placing it).
local JOIN = '1'
local function refuse(code, detail) return redis.error_reply(code .. ' ' .. detail) end
local cf = redis.call('HMGET', KEYS[1], 'closed', 'rate', 'paused', 'places_per_ip', 'pow_difficulty',
  'priority_share', 'method', 'sold_out', 'ended', 'starts_ms', 'max_active', 'ends_ms',
  'max_active_share_per_ip', 'draw', 'pq_total', 'frozen')
if not cf[14] then return refuse('QUEUE_SLOT', 'not sharded') end -- no copy of the settings here
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local method = cf[7] or 'fifo'
local starts = tonumber(cf[10] or '0') or 0

local function prequeuer(created)
  local own = redis.call('ZCARD', KEYS[3])
  return cjson.encode({created = created, state = 'prequeue', waiting = 0,
    prequeue_size = math.max(own, tonumber(cf[15] or '0') or 0),
    arate_milli = 0, real_milli = 0, rate_milli = math.floor((tonumber(cf[2] or '0') or 0) * 1000),
    share_milli = math.floor((tonumber(cf[6] or '0.5') or 0.5) * 1000 + 0.5),
    paused = cf[3] == '1', sold_out = cf[8] == '1', method = method, starts_ms = starts})
end

local cur = redis.call('HGET', KEYS[2], ARGV[1])
if cur then
  if string.sub(cur, 1, 2) == 'q:' then return prequeuer(false) end
  return refuse('IN_LINE', 'moved by the draw') -- the queue's slot has (or is about to have) its place
end
if ARGV[2] ~= JOIN then return refuse('QUEUE_SLOT', 'no entry here') end
if cf[16] == '1' or cf[14] ~= 's' or now >= starts then return refuse('QUEUE_SLOT', 'started') end
local ends = tonumber(cf[12] or '0') or 0
if cf[9] == '1' or (ends > 0 and now >= ends) then return refuse('ENDED', 'the sale has ended') end
if method == 'reject' then return refuse('NOT_OPEN', 'the sale is not open') end
if cf[1] == '1' then return refuse('CLOSED', 'closed to new joiners') end
if cf[8] == '1' then return refuse('SOLD_OUT', 'sold out') end
local need = tonumber(cf[5] or '0') or 0
if need > 0 then
  if ARGV[4] == '' then return refuse('POW_REQUIRED', math.floor(need) .. ' bits') end
  if (tonumber(ARGV[4]) or 0) < need then return refuse('POW_TOO_EASY', math.floor(need) .. ' bits') end
end
-- The per-address cap, join.lua's (places.lua): every place of an address before the start is in the
-- shard its address maps to (queue/prequeue.go), so the cap holds across shards.
local cap = address_cap(cf[4], cf[11], cf[13])
if ARGV[3] ~= '' and cap > 0 and address_full(KEYS[4], KEYS[2], cap, now) then
  return refuse('TOO_MANY_PLACES', 'too many places from this address')
end
if need > 0 then
  local cexp = tonumber(ARGV[5]) or 0
  if cexp <= now then return refuse('POW_INVALID', 'the challenge has expired') end
  if not redis.call('SET', KEYS[5], '1', 'NX', 'PX', cexp - now) then return refuse('POW_INVALID', 'the challenge was used') end
end
local idx = redis.call('HINCRBY', KEYS[1], 'joins', 1)
redis.call('ZADD', KEYS[3], idx, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], 'q:' .. idx .. ':' .. ARGV[3])
if ARGV[3] ~= '' and cap > 0 then
  redis.call('ZADD', KEYS[4], 9e15, ARGV[1])
  redis.call('PEXPIRE', KEYS[4], 86400000)
end
return prequeuer(true)
