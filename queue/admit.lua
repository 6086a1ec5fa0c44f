-- admit.lua: one admission tick of one queue, all in one atomic step.
-- Expired tokens are swept, abandoned places removed, up to N users popped in FIFO order,
-- each given a token (SET with TTL) and marked admitted, the counters advanced and the
-- tick's event PUBLISHed. Because it is one script, Redis runs it all or nothing: no crash
-- can leave a user popped without a token, and the event never describes a state Redis
-- does not hold.
-- KEYS[1]  cfg      HASH   rate, max_active, ttl_ms, paused, closed
-- KEYS[2]  waiting  ZSET   ticket -> sequence
-- KEYS[3]  tickets  HASH   ticket -> "state:seq[:token:exp_ms:extra]"
-- KEYS[4]  seen     ZSET   ticket -> last sign of life (ms)
-- KEYS[5]  clock    HASH   last (us), carry, tick, head, arate, total, lastpub, pubtail
-- KEYS[6]  active   ZSET   admitted ticket -> token expiry (ms)
-- KEYS[7]  gone     ZSET   departed sequences ahead of the head
-- KEYS[8]  gonenew  LIST   departures not yet published
-- KEYS[9]  lease    STRING lease owner
-- KEYS[10] fence    STRING fencing counter
-- KEYS[11] ev       STRING event counter
-- KEYS[12] events   pub/sub channel name (passed as a key so it shares the hash tag)
-- KEYS[13] seq      STRING last sequence handed out
-- KEYS[14] retire   ZSET   admitted ticket -> when its row in tickets may be dropped (ms)
-- KEYS[15…] token keys, one per pre-made token in ARGV[8…] (same order)
-- ARGV[1] owner id     ARGV[2] fencing token     ARGV[3] max elapsed ms counted per tick
-- ARGV[4] abandonment grace ms (0 = off)     ARGV[5] sweep limit per tick
-- ARGV[6] publish at least every this many ms
-- ARGV[7] how late this tick started, in ms (kept for the admin view)
-- ARGV[8…] token values (UUID v4 made by the caller)
-- Returns {admitted, ev (0 = nothing published), waiting, active, tick, head,
--          arate_milli, rate_milli, max_active, expired, abandoned} or {-1} when fenced off.
if redis.call('GET', KEYS[9]) ~= ARGV[1] or redis.call('GET', KEYS[10]) ~= ARGV[2] then
  return {-1}
end
local RETAIN = 86400000 -- keep a finished ticket's row for a day after its token expires
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)
local cfg = redis.call('HMGET', KEYS[1], 'rate', 'max_active', 'ttl_ms', 'paused')
local rate = tonumber(cfg[1] or '0') or 0
local max_active = tonumber(cfg[2] or '0') or 0
local ttl = tonumber(cfg[3] or '300000') or 300000
local paused = cfg[4] == '1'
local c = redis.call('HMGET', KEYS[5], 'last', 'carry', 'tick', 'head', 'arate', 'total', 'lastpub', 'pubtail')
local last = tonumber(c[1] or '0') or 0
local carry = tonumber(c[2] or '0') or 0
local tick = (tonumber(c[3] or '0') or 0) + 1
local head = tonumber(c[4] or '0') or 0
local arate = tonumber(c[5] or '0') or 0
local total = tonumber(c[6] or '0') or 0
local lastpub = tonumber(c[7] or '0') or 0
local pubtail = tonumber(c[8] or '0') or 0
local elapsed = 0
if last > 0 then elapsed = (now_us - last) / 1000 end
if elapsed < 0 then elapsed = 0 end
if elapsed > tonumber(ARGV[3]) then elapsed = tonumber(ARGV[3]) end
local limit = tonumber(ARGV[5])

-- Tokens that lapsed unused: the ticket must join again; the slot is free.
local expired = {}
for _, tk in ipairs(redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', now, 'LIMIT', 0, limit)) do
  local cur = redis.call('HGET', KEYS[3], tk)
  if cur and string.sub(cur, 1, 2) == 'a:' then
    redis.call('HSET', KEYS[3], tk, 'e' .. string.sub(cur, 2))
    expired[#expired + 1] = tk
  end
  redis.call('ZREM', KEYS[6], tk)
end

-- Rows of tickets admitted more than a day ago (token long expired or used) are dropped,
-- so the tickets hash does not grow without end; such a ticket simply joins again.
for _, tk in ipairs(redis.call('ZRANGEBYSCORE', KEYS[14], '-inf', now, 'LIMIT', 0, limit)) do
  local cur = redis.call('HGET', KEYS[3], tk)
  if cur and string.sub(cur, 1, 2) ~= 'w:' then redis.call('HDEL', KEYS[3], tk) end
  redis.call('ZREM', KEYS[14], tk)
end

-- Places with no sign of life for the grace period leave the line.
local departed = 0
local grace = tonumber(ARGV[4])
if grace > 0 then
  for _, tk in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now - grace, 'LIMIT', 0, limit)) do
    local s = redis.call('ZSCORE', KEYS[2], tk)
    if s then
      redis.call('ZREM', KEYS[2], tk)
      redis.call('ZADD', KEYS[7], s, s)
      redis.call('RPUSH', KEYS[8], s)
      redis.call('HDEL', KEYS[3], tk)
      departed = departed + 1
    end
    redis.call('ZREM', KEYS[4], tk)
  end
end

-- How many to admit: rate × elapsed plus the carried fraction, within every cap.
local allowance = 0
if not paused and rate > 0 then allowance = carry + rate * elapsed / 1000 end
local n = math.floor(allowance)
local cap = math.min(#ARGV - 7, #KEYS - 14)
local waiting = redis.call('ZCARD', KEYS[2])
local active = redis.call('ZCARD', KEYS[6])
if max_active > 0 then cap = math.min(cap, math.max(0, max_active - active)) end
cap = math.min(cap, waiting)
if n > cap then n = cap end
carry = math.min(allowance - n, 1)

local adm = {}
if n > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[2], n)
  for i = 1, #popped, 2 do
    local tk, s = popped[i], popped[i + 1]
    local k = (i + 1) / 2
    local token = ARGV[7 + k]
    local exp = now + ttl
    redis.call('SET', KEYS[14 + k], tk, 'PX', ttl)
    redis.call('HSET', KEYS[3], tk, 'a:' .. s .. ':' .. token .. ':' .. exp .. ':' .. tick .. ':' .. now)
    redis.call('ZADD', KEYS[6], exp, tk)
    redis.call('ZREM', KEYS[4], tk)
    redis.call('ZADD', KEYS[14], exp + RETAIN, tk)
    head = tonumber(s)
    adm[#adm + 1] = {t = tk, k = token, x = exp, s = head, i = now}
  end
  n = #adm
end
total = total + n
-- The measured rate is a 5 s moving average of what was really admitted while there was
-- someone to admit: a pause or an empty line does not drag it to zero (the ETA of the next
-- arrivals would explode). It starts from the configured rate.
if elapsed > 0 and not paused and rate > 0 and waiting > 0 then
  if arate <= 0 then arate = rate end
  local alpha = 1 - math.exp(-elapsed / 5000)
  arate = arate + alpha * (n * 1000 / elapsed - arate)
end

local gonelist = redis.call('LRANGE', KEYS[8], 0, -1)
if #gonelist > 0 then redis.call('DEL', KEYS[8]) end
redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', head)
local tail = tonumber(redis.call('GET', KEYS[13]) or '0')
waiting = waiting - n

local ev = 0
if n > 0 or #gonelist > 0 or #expired > 0 or tail ~= pubtail or now - lastpub >= tonumber(ARGV[6]) then
  ev = redis.call('INCR', KEYS[11])
  -- The message format is queue.Tick (tick.go); v is queue.TickVersion.
  local msg = {v = 1, ev = ev, tick = tick, head = head, tail = tail, waiting = waiting, now = now,
    rate = rate, arate = arate, paused = paused}
  if #adm > 0 then msg.adm = adm end
  if #gonelist > 0 then
    local g = {}
    for i, s in ipairs(gonelist) do g[i] = tonumber(s) end
    msg.gone = g
  end
  if #expired > 0 then msg.exp = expired end
  redis.call('PUBLISH', KEYS[12], cjson.encode(msg))
  lastpub = now
  pubtail = tail
end
redis.call('HSET', KEYS[5], 'last', now_us, 'carry', carry, 'tick', tick, 'head', head,
  'arate', arate, 'total', total, 'lastpub', lastpub, 'pubtail', pubtail, 'lag_ms', ARGV[7])
return {n, ev, waiting, active + n, tick, head, math.floor(arate * 1000),
  math.floor(rate * 1000), max_active, #expired, departed}
