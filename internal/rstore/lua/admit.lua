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
-- KEYS[15] waiting:p ZSET  the priority line: ticket -> its sequence in that line
-- KEYS[16] gone:p    ZSET  its departed sequences ahead of its head
-- KEYS[17] gonenew:p LIST  its departures not yet published
-- KEYS[18] waiting:b, KEYS[19] gone:b, KEYS[20] gonenew:b: the bypass line, likewise
-- KEYS[21] pre      ZSET   the pre-queue of a scheduled queue (ticket -> join number)
-- KEYS[22] drawset  ZSET   the frozen participant list (pre renamed at the start)
-- KEYS[23] draw     HASH   the draw's record (base, n, frozen_ms, …)
-- KEYS[24…] token keys, one per pre-made token in ARGV[9…] (same order)
-- A scheduled queue (cfg draw = PHASE_SCHEDULED) admits nobody before its start; at the
-- start this tick (or a join, whichever comes first) freezes the pre-queue, and nobody is
-- admitted while the draw places its members (PHASE_FROZEN); the caller runs the draw when
-- told (answer phase PHASE_FROZEN). Nobody is admitted while sold out or after the end
-- either (the caller ends the line when told).
-- The lanes' counters, heads and publication marks are fields of clock (seq_p, head_p,
-- pubtail_p, seq_b, …) and pcarry is the priority line's fractional carry; a lane whose
-- counter has not passed its head is empty, and costs no command here.
-- ARGV[1] owner id     ARGV[2] fencing token     ARGV[3] max elapsed ms counted per tick
-- ARGV[4] abandonment grace ms (0 = off)     ARGV[5] sweep limit per tick
-- ARGV[6] publish at least every this many ms
-- ARGV[7] how late this tick started, in ms (kept for the admin view)
-- ARGV[8] how the tick message goes out, a publish mode then optionally REST_WHEN_IDLE
--         (the constants below; Go: tickPublish and restWhenIdle in script.go)
-- ARGV[9…] token values (UUID v4 made by the caller)
-- The freeze at the start is freeze.lua's (Go puts that prelude before this text).
--
-- Answers a JSON object (cjson.encode; Go: admitAnswer in script.go). Every number in it
-- stays below 10^14, within the 14 significant digits cjson writes:
--   admitted     how many this tick admitted, from every line
--   ev           the event number of the message this tick published (0: none)
--   waiting      the normal line's length after the tick;   head, tail: its head and tail
--   active       live tokens after the tick;                 tick: the tick number
--   rate_milli   the configured rate × 1000, floored
--   expired      tokens that lapsed unused;                  abandoned: places that left
--   waiting_p, waiting_b     the priority and bypass lines' lengths after the tick
--   admitted_p, admitted_b   how many of admitted each of them gave
--   phase        the draw phase after the tick: "" none, PHASE_SCHEDULED, PHASE_FROZEN
--                (the draw is due), PHASE_DRAWN
--   end_due      true when ends_at has passed and the line is not yet ended
--   rested       true when the queue now rests (below)
--   starts_ms, ends_ms   the schedule's instants (0 unset)
--   message      the tick message, only in mode PUBLISH_RETURN when one is due (it goes
--                over the wire as it is: a string, not re-encoded)
--   seqs         the normal line's sequences this tick admitted, for the waits' history
--                (absent when none: cjson writes an empty table as {})
-- A tick whose owner or fencing token is not the lease's changes nothing and answers the
-- refusal FENCED (redis.error_reply; Go: errFenced, mapped in errors.go).
-- Resting: with REST_WHEN_IDLE, a tick that leaves nobody waiting in any line, no
-- pre-queue (nor a sharded one before its start), no live token and nothing due (no draw, no
-- end) sets clock idle = 1 and
-- deletes the lease in the same step; the loops then stop ticking (lease.lua answers -2)
-- until a join clears idle (join.lua) and wakes them. An idle queue thus costs no Redis
-- command per tick.
-- Mixed versions (a rolling deploy): the answer and the refusal pass only between this
-- script and the Go code of the same release (each release runs its own text, by its own
-- SHA), so they may differ between releases. What it writes to Redis (keys, hash fields,
-- stored strings, sorted-set members and scores) and the tick message it publishes are
-- what both releases read: they are the contract between them and keep their layout
-- (docs/UPGRADING.md says how that is checked).

-- How the tick message goes out (ARGV[8]'s first letter): PUBLISH here; SPUBLISH here (a
-- Redis Cluster: the channel is in the queue's slot); both (a rolling deploy between the
-- two); returned to the caller, who publishes it once a replica has acknowledged this
-- script's writes (WAIT cannot run in a script).
local PUBLISH_PLAIN, PUBLISH_SHARDED, PUBLISH_BOTH, PUBLISH_RETURN = 'p', 's', 'b', 'r'
-- ARGV[8]'s second letter: let the queue rest when it is idle.
local REST_WHEN_IDLE = 'i'

if redis.call('GET', KEYS[9]) ~= ARGV[1] or redis.call('GET', KEYS[10]) ~= ARGV[2] then
  return redis.error_reply('FENCED another owner holds the lease')
end
local RETAIN = 86400000 -- keep a finished ticket's row for a day after its token expires
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)
local cfg = redis.call('HMGET', KEYS[1], 'rate', 'max_active', 'ttl_ms', 'paused', 'priority_share',
  'method', 'sold_out', 'ended', 'starts_ms', 'ends_ms', 'draw', 'ttl_min_ms', 'ttl_halve_at', 'pq_other', 'pq_tags')
local rate = tonumber(cfg[1] or '0') or 0
local max_active = tonumber(cfg[2] or '0') or 0
local ttl = tonumber(cfg[3] or '300000') or 300000
local paused = cfg[4] == '1'
local share = tonumber(cfg[5] or '0.5') or 0.5
local random = cfg[6] == 'random'
local sold_out = cfg[7] == '1'
local ended = cfg[8] == '1'
local starts = tonumber(cfg[9] or '0') or 0
local ends = tonumber(cfg[10] or '0') or 0
local phase = cfg[11] or ''
local end_due = (ends > 0 and now >= ends and not ended) and 1 or 0
-- The start: the pre-queue is frozen and the next n sequences of the normal line reserved
-- for its members (freeze.lua; a join after the start may have done it first).
-- A sharded pre-queue stays scheduled (and blocked) until queue/prequeue.go has frozen every
-- shard: the caller sees the phase still scheduled past the start and does it.
if phase == PHASE_SCHEDULED and now >= starts then
  if freeze(KEYS[1], KEYS[13], KEYS[21], KEYS[22], KEYS[23], now) then phase = PHASE_FROZEN end
end
-- Nobody is let in before the start, while the draw runs, while sold out, or after the end.
local blocked = phase == PHASE_SCHEDULED or phase == PHASE_FROZEN or sold_out or ended
  or end_due == 1
local pq = 0
-- The pre-queue's size: this slot's, plus the other shards' as the leader last counted them
-- (cfg pq_other; absent for an unsharded pre-queue).
if phase == PHASE_SCHEDULED then pq = redis.call('ZCARD', KEYS[21]) + (tonumber(cfg[14] or '0') or 0) end
local c = redis.call('HMGET', KEYS[5], 'last', 'carry', 'tick', 'head', 'arate', 'total', 'lastpub', 'pubtail',
  'seq_p', 'head_p', 'pubtail_p', 'seq_b', 'head_b', 'pubtail_b', 'pcarry', 'pubst', 'real', 'arate_r')
local last = tonumber(c[1] or '0') or 0
local carry = tonumber(c[2] or '0') or 0
local tick = (tonumber(c[3] or '0') or 0) + 1
local head = tonumber(c[4] or '0') or 0
local arate = tonumber(c[5] or '0') or 0
local total = tonumber(c[6] or '0') or 0
local lastpub = tonumber(c[7] or '0') or 0
local pubtail = tonumber(c[8] or '0') or 0
local pcarry = tonumber(c[15] or '0') or 0
-- The invite lanes, bypass first (the order of admission). live: the lane may have
-- waiters or unpublished departures (its counter is past its head).
local function lane(name, tl, hd, pt, w, g, gn)
  local L = {name = name, tail = tonumber(tl or '0') or 0, head = tonumber(hd or '0') or 0,
    pubtail = tonumber(pt or '0') or 0, w = w, g = g, gn = gn, waiting = 0, n = 0}
  L.live = L.tail > L.head
  return L
end
local B = lane('b', c[12], c[13], c[14], KEYS[18], KEYS[19], KEYS[20])
local P = lane('p', c[9], c[10], c[11], KEYS[15], KEYS[16], KEYS[17])
local LANES = {B, P}
local used = B.tail > 0 or P.tail > 0
local NK = 23 -- token keys start after this many keys
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
local retired = 0
for _, tk in ipairs(redis.call('ZRANGEBYSCORE', KEYS[14], '-inf', now, 'LIMIT', 0, limit)) do
  retired = retired + 1
  local cur = redis.call('HGET', KEYS[3], tk)
  if cur and string.sub(cur, 1, 2) ~= 'w:' then redis.call('HDEL', KEYS[3], tk) end
  redis.call('ZREM', KEYS[14], tk)
end

-- Places with no sign of life for the grace period leave the line.
local departed = 0
local grace = tonumber(ARGV[4])
-- Not while the draw places the pre-queue: its members' streams start signing life once
-- every place is known.
if grace > 0 and phase ~= PHASE_FROZEN then
  for _, tk in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now - grace, 'LIMIT', 0, limit)) do
    local w, g, gn = KEYS[2], KEYS[7], KEYS[8]
    local s = redis.call('ZSCORE', w, tk)
    if not s then
      for _, L in ipairs(LANES) do
        if L.live then
          s = redis.call('ZSCORE', L.w, tk)
          if s then
            w, g, gn = L.w, L.g, L.gn
            break
          end
        end
      end
    end
    if s then
      redis.call('ZREM', w, tk)
      redis.call('ZADD', g, s, s)
      redis.call('RPUSH', gn, s)
      redis.call('HDEL', KEYS[3], tk)
      departed = departed + 1
    end
    redis.call('ZREM', KEYS[4], tk)
  end
end

-- How many to admit: rate × elapsed plus the carried fraction, within every cap.
local allowance = 0
if not paused and not blocked and rate > 0 then allowance = carry + rate * elapsed / 1000 end
local n = math.floor(allowance)
local cap = math.min(#ARGV - 8, #KEYS - NK)
local waiting = redis.call('ZCARD', KEYS[2])
for _, L in ipairs(LANES) do
  if L.live then L.waiting = redis.call('ZCARD', L.w) end
end
local everyone = waiting + B.waiting + P.waiting
local active = redis.call('ZCARD', KEYS[6])
if max_active > 0 then cap = math.min(cap, math.max(0, max_active - active)) end
cap = math.min(cap, everyone)
if n > cap then n = cap end
carry = math.min(allowance - n, 1)

-- The split: bypass waiters first (within this tick's n, so a batch of bypass invites is
-- admitted over the next ticks at the queue's rate, never as one burst); of the rest the
-- priority line gets priority_share, with its fraction carried (pcarry) so that over many
-- ticks the split is exact, and the normal line the remainder. A line with too few
-- waiters leaves its part to the other (work-conserving); then nothing is owed either
-- way and pcarry restarts, so it never builds up while the priority line is empty.
B.n = math.min(n, B.waiting)
local rest = n - B.n
local nn = 0
if P.waiting == 0 or waiting == 0 then
  P.n = math.min(rest, P.waiting)
  nn = rest - P.n
  pcarry = 0
elseif rest > 0 then
  local due = rest * share + pcarry
  local fair = math.floor(due + 1e-9)
  P.n = math.min(fair, P.waiting)
  nn = rest - P.n
  if nn > waiting then
    nn = waiting
    P.n = rest - nn
  end
  if P.n == fair then pcarry = due - fair else pcarry = 0 end
end

-- The adaptive token TTL (ttl_min_ms > 0): the longer the line, the shorter the token's
-- life, ttl × H / (H + waiting), never below ttl_min_ms (Settings.EffectiveTTL).
local ttl_min = tonumber(cfg[12] or '0') or 0
if ttl_min > 0 then
  local h = tonumber(cfg[13] or '1000') or 1000
  local w = waiting + P.waiting + B.waiting
  if h > 0 and w > 0 then ttl = math.max(ttl_min, math.floor(ttl * h / (h + w))) end
end
local adm = {}
local k = 0
local function admit(tk, s, suffix, letter)
  k = k + 1
  local token = ARGV[8 + k]
  local exp = now + ttl
  redis.call('SET', KEYS[NK + k], tk, 'PX', ttl)
  redis.call('HSET', KEYS[3], tk, 'a:' .. s .. ':' .. token .. ':' .. exp .. ':' .. tick .. ':' .. now .. suffix)
  redis.call('ZADD', KEYS[6], exp, tk)
  redis.call('ZREM', KEYS[4], tk)
  redis.call('ZADD', KEYS[14], exp + RETAIN, tk)
  adm[#adm + 1] = {t = tk, k = token, x = exp, s = tonumber(s), i = now, l = letter}
end
for _, L in ipairs(LANES) do
  if L.n > 0 then
    local popped = redis.call('ZPOPMIN', L.w, L.n)
    local got = 0
    for i = 1, #popped, 2 do
      local tk, s = popped[i], popped[i + 1]
      L.head = tonumber(s)
      -- An instance whose leave.lua knows only the normal line (docs/UPGRADING.md, mixed
      -- versions) may let this waiter leave without taking it out of the lane: a ticket
      -- whose row is no longer a waiter of this lane is passed over, not admitted.
      local cur = redis.call('HGET', KEYS[3], tk)
      if cur and string.sub(cur, 1, 2) == 'w:' and string.sub(cur, -2) == ':' .. L.name then
        admit(tk, s, ':' .. L.name, L.name)
        got = got + 1
      end
    end
    L.waiting = L.waiting - #popped / 2
    L.n = got
  end
end
if nn > 0 and random then
  -- A lottery: nn waiters chosen at random. Each leaves a hole ahead of the head, kept as a
  -- departure (so positions stay exact if the method changes back to fifo); when the line
  -- is empty the head moves to the tail and the holes are dropped (below).
  local picked = redis.call('ZRANDMEMBER', KEYS[2], nn)
  for _, tk in ipairs(picked) do
    local s = redis.call('ZSCORE', KEYS[2], tk)
    redis.call('ZREM', KEYS[2], tk)
    admit(tk, s, '', nil)
    redis.call('ZADD', KEYS[7], s, s)
    redis.call('RPUSH', KEYS[8], s)
  end
  nn = #picked
elseif nn > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[2], nn)
  for i = 1, #popped, 2 do
    local tk, s = popped[i], popped[i + 1]
    admit(tk, s, '', nil)
    head = tonumber(s)
  end
  nn = #popped / 2
end
n = #adm
total = total + n
-- Two rates (docs/API.md, "the ETA"):
-- arate, the ETA's estimate: a 5 s moving average of what was admitted while admission ran
-- with someone to admit. An empty line does not drag it to zero (the next arrivals' ETA would
-- explode); a pause, a block (before the start, sold out) or a change of the configured rate
-- restarts it from the configured rate, so an estimate from before never outlives them.
-- real: what was really admitted per second over about the last 5 s, paused or not (the
-- admin view's and the page's "admitted per second"; shown as 0 while paused or empty).
local alpha = 1 - math.exp(-elapsed / 5000)
local real = tonumber(c[17] or '0') or 0
if elapsed > 0 then real = real + alpha * (n * 1000 / elapsed - real) end
if real < 0.001 then real = 0 end
if paused or blocked or rate ~= (tonumber(c[18] or '') or rate) then arate = 0 end
if elapsed > 0 and not paused and not blocked and rate > 0 and everyone > 0 then
  if arate <= 0 then arate = rate end
  arate = arate + alpha * (n * 1000 / elapsed - arate)
end
local real_shown = real
if paused or everyone == 0 then real_shown = 0 end

local gonelist = redis.call('LRANGE', KEYS[8], 0, -1)
if #gonelist > 0 then redis.call('DEL', KEYS[8]) end
redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', head)
local tail = tonumber(redis.call('GET', KEYS[13]) or '0')
waiting = waiting - nn
if random and nn > 0 then
  -- Every sequence below the lowest one still waiting has been admitted or has left, so the
  -- head moves up to it and the holes below are dropped (they never pile up).
  local low = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if #low > 0 then head = math.max(head, tonumber(low[2]) - 1) else head = math.max(head, tail) end
  redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', head)
end
-- What the streams show besides the line: the schedule (starts, pre-queue size, phase),
-- sold out, the method, the end. A change is published at once.
local mth = cfg[6] or ''
if mth == 'fifo' then mth = '' end
local IDLE = ':0:0:0::0' -- no schedule, not sold out, fifo, not ended (pubst unset)
local st = phase .. ':' .. pq .. ':' .. starts .. ':' .. (sold_out and 1 or 0) .. ':' .. mth .. ':' .. (ended and 1 or 0)
local st_changed = st ~= (c[16] or IDLE)
local lanes_changed = false
for _, L in ipairs(LANES) do
  -- A live lane left with nobody waiting: every sequence up to its tail was admitted or
  -- has left, so its head moves to the tail and its departures are dropped. The lane is
  -- then no longer live and costs no command on the next ticks (an idle queue stays free).
  if L.live and L.waiting == 0 and L.head ~= L.tail then
    L.head = L.tail
    L.moved = true
  end
  L.gone = {}
  if L.live then
    L.gone = redis.call('LRANGE', L.gn, 0, -1)
    if #L.gone > 0 then redis.call('DEL', L.gn) end
    redis.call('ZREMRANGEBYSCORE', L.g, '-inf', L.head)
  end
  if L.n > 0 or #L.gone > 0 or L.tail ~= L.pubtail or L.moved then lanes_changed = true end
end

local ev = 0
local out = ''
if n > 0 or #gonelist > 0 or #expired > 0 or tail ~= pubtail or lanes_changed or st_changed or now - lastpub >= tonumber(ARGV[6]) then
  ev = redis.call('INCR', KEYS[11])
  -- The message format is queue.Tick (tick.go); v is queue.TickVersion.
  local msg = {v = 1, ev = ev, tick = tick, head = head, tail = tail, waiting = waiting, now = now,
    rate = rate, arate = arate, paused = paused, real = real_shown}
  if #adm > 0 then msg.adm = adm end
  if #gonelist > 0 then
    local g = {}
    for i, s in ipairs(gonelist) do g[i] = tonumber(s) end
    msg.gone = g
  end
  if #expired > 0 then msg.exp = expired end
  -- Fields of version 1 that readers without them ignore: the schedule while the queue has
  -- one, sold out, a method other than fifo, the end.
  if phase ~= '' then
    local d = redis.call('HMGET', KEYS[23], 'base', 'n')
    msg.sched = {starts = starts, pq = pq, phase = phase, base = tonumber(d[1] or '0') or 0, n = tonumber(d[2] or '0') or 0}
  end
  if sold_out then msg.so = true end
  if mth ~= '' then msg.m = mth end
  if ended then msg['end'] = true end
  -- The lanes, once one has been used (queue.TickLanes); empty arrays are left out, as
  -- cjson would write them as {}.
  if used then
    local lanes = {share = share}
    for _, L in ipairs(LANES) do
      if L.tail > 0 then
        local o = {head = L.head, tail = L.tail, waiting = L.waiting}
        if #L.gone > 0 then
          local g = {}
          for i, s in ipairs(L.gone) do g[i] = tonumber(s) end
          o.gone = g
        end
        lanes[L.name] = o
        L.pubtail = L.tail
      end
    end
    msg.lanes = lanes
  end
  local how = string.sub(ARGV[8], 1, 1)
  if how == PUBLISH_RETURN then
    out = cjson.encode(msg)
  else
    local body = cjson.encode(msg)
    if how ~= PUBLISH_SHARDED then redis.call('PUBLISH', KEYS[12], body) end
    if how == PUBLISH_SHARDED or how == PUBLISH_BOTH then redis.call('SPUBLISH', KEYS[12], body) end
  end
  lastpub = now
  pubtail = tail
end
if st_changed and ev > 0 then redis.call('HSET', KEYS[5], 'pubst', st) end
if used then
  redis.call('HSET', KEYS[5], 'last', now_us, 'carry', carry, 'tick', tick, 'head', head,
    'arate', arate, 'total', total, 'lastpub', lastpub, 'pubtail', pubtail, 'lag_ms', ARGV[7],
    'real', real, 'real_shown', real_shown, 'arate_r', rate, 'head_p', P.head, 'pubtail_p', P.pubtail, 'head_b', B.head, 'pubtail_b', B.pubtail, 'pcarry', pcarry)
else
  redis.call('HSET', KEYS[5], 'last', now_us, 'carry', carry, 'tick', tick, 'head', head,
    'arate', arate, 'total', total, 'lastpub', lastpub, 'pubtail', pubtail, 'lag_ms', ARGV[7],
    'real', real, 'real_shown', real_shown, 'arate_r', rate)
end
-- The queue's running totals of lapsed tokens and abandoned places (its history reads them).
if #expired > 0 then redis.call('HINCRBY', KEYS[5], 'expired_n', #expired) end
if departed > 0 then redis.call('HINCRBY', KEYS[5], 'abandoned_n', departed) end
local rested = false
if string.sub(ARGV[8], 2, 2) == REST_WHEN_IDLE
  and waiting == 0 and B.waiting == 0 and P.waiting == 0 and active + n == 0 and pq == 0
  and phase ~= PHASE_FROZEN and end_due == 0 and retired < limit and #expired < limit
  -- A sharded pre-queue's leader keeps ticking until the start: it counts the other shards
  -- (their joins wake nobody) and freezes them at the start (queue/prequeue.go).
  and not (phase == PHASE_SCHEDULED and (cfg[15] or '') ~= '') then
  redis.call('HSET', KEYS[5], 'idle', '1')
  redis.call('DEL', KEYS[9])
  rested = true
end
local answer = {admitted = n, ev = ev, waiting = waiting, head = head, tail = tail, active = active + n,
  tick = tick, rate_milli = math.floor(rate * 1000), expired = #expired, abandoned = departed,
  waiting_p = P.waiting, waiting_b = B.waiting, admitted_p = P.n, admitted_b = B.n,
  phase = phase, end_due = end_due == 1, rested = rested, starts_ms = starts, ends_ms = ends}
if out ~= '' then answer.message = out end
local seqs = {}
for _, a in ipairs(adm) do
  if not a.l then seqs[#seqs + 1] = a.s end
end
if #seqs > 0 then answer.seqs = seqs end
return cjson.encode(answer)
