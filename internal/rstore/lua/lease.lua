-- lease.lua: take or keep the admission lease of one queue.
-- KEYS[1] lease   STRING owner of the lease, with a PX expiry
-- KEYS[2] fence   STRING fencing counter, incremented on every new holder
-- KEYS[3] clock   HASH   admission state; field idle = "1" while the queue rests (admit.lua)
-- KEYS[4] cfg     HASH   settings (CHECK: the schedule)            KEYS[5] waiting ZSET
-- KEYS[6] active  ZSET   KEYS[7] pre ZSET   KEYS[8] retire ZSET (CHECK: is the rest real)
-- ARGV[1] owner id (instance + loop nonce)
-- ARGV[2] lease time in ms
-- ARGV[3] the mode, one of the constants below (Go: leaseMode in script.go)
-- TAKE answers the fencing token (> 0) while ARGV[1] holds the lease, else 0; RELEASE
-- answers 0. CHECK answers {fence, starts_ms, ends_ms}: fence as TAKE's, or -2
-- when the queue rests (nobody holds the lease; the caller rests too and wakes at the
-- schedule's next instant); starts_ms and ends_ms are filled in only with -2.
-- A resting queue has no leader: the last one released the lease in the same step that set
-- idle, and a join that ends the rest clears it. CHECK does not trust the flag alone: a
-- lease someone holds (a loop that does not rest: the caller follows it),
-- anyone waiting (in any line or the pre-queue; a sharded pre-queue before its start, whose
-- other shards' joins wake nobody), a live token, a due schedule instant or rows
-- due for retirement end the rest here, so a stale flag costs one rest check, never the queue.

-- The modes (ARGV[3]).
local TAKE = '0'    -- take or keep even if the queue rests (the rest ends: tests and tools
                    -- that tick by hand, the schedule's instants)
local RELEASE = '1' -- let the lease go if ARGV[1] holds it
local CHECK = '2'   -- take or keep unless the queue really rests

local function take()
  if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return redis.call('INCR', KEYS[2])
  end
  if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return tonumber(redis.call('GET', KEYS[2]) or '0')
  end
  return 0
end
if ARGV[3] == RELEASE then
  if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
  return 0
end
if ARGV[3] == TAKE then
  local f = take()
  if f > 0 then redis.call('HDEL', KEYS[3], 'idle') end
  return f
end
-- CHECK: the holder renews, and anyone else while a holder exists waits: no more reads than
-- that (a leader renews twice a second, every other instance tries as often).
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {tonumber(redis.call('GET', KEYS[2]) or '0'), 0, 0}
end
if cur then return {0, 0, 0} end
local ck = redis.call('HMGET', KEYS[3], 'idle', 'seq_p', 'head_p', 'seq_b', 'head_b')
if ck[1] ~= '1' then return {take(), 0, 0} end
local cf = redis.call('HMGET', KEYS[4], 'draw', 'starts_ms', 'ends_ms', 'ended', 'pq_tags')
local starts = tonumber(cf[2] or '0') or 0
local ends = tonumber(cf[3] or '0') or 0
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local busy = (tonumber(ck[2] or '0') or 0) > (tonumber(ck[3] or '0') or 0)
  or (tonumber(ck[4] or '0') or 0) > (tonumber(ck[5] or '0') or 0)
  or redis.call('ZCARD', KEYS[5]) > 0 or redis.call('ZCARD', KEYS[6]) > 0
  or (cf[1] == 's' and (now >= starts or (cf[5] or '') ~= '' or redis.call('ZCARD', KEYS[7]) > 0))
  or (ends > 0 and now >= ends and cf[4] ~= '1')
if not busy then
  local r = redis.call('ZRANGE', KEYS[8], 0, 0, 'WITHSCORES')
  busy = #r > 0 and tonumber(r[2]) <= now
end
if busy then
  redis.call('HDEL', KEYS[3], 'idle')
  return {take(), starts, ends}
end
return {-2, starts, ends}
