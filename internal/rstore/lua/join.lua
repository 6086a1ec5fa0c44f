-- join.lua: give a ticket its place in line, or return the place it already has.
-- KEYS[1]  cfg       HASH  queue settings (missing = unknown queue)
-- KEYS[2]  seq       STRING last sequence number handed out (the normal line)
-- KEYS[3]  waiting   ZSET  ticket -> sequence (the normal line)
-- KEYS[4]  tickets   HASH  ticket -> "state:seq[:token:exp_ms:extra[:iat_ms[:lane]]]" (state.go)
-- KEYS[5]  seen      ZSET  ticket -> last sign of life (ms), for abandonment
-- KEYS[6]  clock     HASH  admission state (head, measured rate; seq_p/head_p, seq_b/head_b
--                          of the invite lanes)
-- KEYS[7]  places    ZSET  the places of one client address: ticket -> sequence (9e15 for a
--                          pre-queue place); unused when ARGV[3] is empty. A member counts
--                          while its ticket's row says the place lives (live() below).
-- KEYS[8]  pow       STRING the single-use record of the presented proof-of-work challenge
-- KEYS[9]  invites   HASH  code -> "lane:uses_left:expires_ms:max_uses:created_ms"
-- KEYS[10] invitexp  ZSET  code -> expires_ms
-- KEYS[11] waiting:p ZSET  ticket -> sequence (the priority line)
-- KEYS[12] waiting:b ZSET  ticket -> sequence (the bypass line)
-- KEYS[13] gone      ZSET  departed sequences of the normal line ahead of its head
-- KEYS[14] gonenew   LIST  departures not yet published
-- KEYS[15] pre       ZSET  the pre-queue of a scheduled queue: ticket -> join number
-- KEYS[16] drawset   ZSET  the frozen participant list (pre renamed at the start)
-- KEYS[17] draw      HASH  the draw's record (joins, base, n, frozen_ms, …; schedule.go)
-- KEYS[18] active    ZSET  admitted ticket -> token expiry (passthrough admits here)
-- KEYS[19] retire    ZSET  admitted ticket -> when its row may be dropped
-- KEYS[20] token     STRING the key of ARGV[7] (a passthrough admission's token)
-- ARGV[1] ticket id
-- ARGV[2] JOIN or STATUS (the constants below; Go: joinMode in script.go)
-- ARGV[3] the client address key ("" = not capped)
-- ARGV[4] difficulty of the verified proof-of-work challenge presented ("" = none)
-- ARGV[5] the presented challenge's expiry (Unix ms): on Redis time, a challenge past it is
--         refused (POW_INVALID) and its record is kept until it (whatever the instance's
--         clock says)
-- ARGV[6] invite code ("" = none)
-- ARGV[7] a fresh token (UUID) for a passthrough admission
-- The freeze at the start is freeze.lua's, the address cap places.lua's (Go puts those preludes
-- before this text).
--
-- Answers a JSON object (cjson.encode; Go: joinAnswer in script.go). Every number in it
-- stays below 10^14, within the 14 significant digits cjson writes; a field left out is
-- zero, "" or false:
--   created        true for a new place, false for the place the ticket already has
--   state          "waiting", "prequeue", "admitted", "expired" or "used"
--   seq            the place's sequence in its lane's line (0 in the pre-queue)
--   position       1 = next to be admitted (0 when not waiting; a pre-queue place has none:
--                  the caller shows null)
--   waiting        the length of the place's line (a lane's own; the normal line's when
--                  not waiting)
--   lane           "" normal, "p" priority, "b" bypass
--   other_waiting  for a normal waiter the priority line's length, for a priority waiter
--                  the normal line's (the ETA's share of the rate depends on it)
--   token, exp_ms, iat_ms   an admitted place's token, its expiry and its issue (Unix ms)
--   prequeue_size  the pre-queue's size, for a pre-queue place
--   arate_milli, real_milli, rate_milli, share_milli   the ETA's rate estimate, what was
--                  really admitted per second lately, the configured rate and priority_share,
--                  each × 1000
--   paused, sold_out, method, starts_ms   the queue's settings (starts_ms 0: unscheduled)
--   woke           true when this join ended the queue's rest (clock idle, see admit.lua):
--                  the caller wakes the admission loops
-- A refusal is redis.error_reply('CODE detail'), named by its first word (Go maps them in
-- errors.go):
--   UNKNOWN_QUEUE  no such queue                  CLOSED    closed to new joiners
--   NO_PLACE       the ticket has none (STATUS only)
--   TOO_MANY_PLACES  the address holds its cap of live places already (places_per_ip, or
--                  its share of max_active)
--   POW_REQUIRED <bits>  a new place needs a proof of work and none came
--   POW_TOO_EASY <bits>  the proof is for a lower difficulty than the queue's
--   POW_INVALID    the challenge was used already or has expired (on Redis time)
--   INVITE_INVALID the invite code is unknown (never made, revoked, used up, or another
--                  queue's) or expired (a normal waiter who brought it keeps the place)
--   ENDED          the sale has ended (ends_at)  SOLD_OUT  sold out
--   NOT_OPEN       the queue's method is reject
--   SHARDED        a new entry of a sharded pre-queue, which only its shards take (the caller
--                  reads the shards and joins there)
--   STARTING       a sharded pre-queue's start has come and it is not frozen yet (the caller
--                  freezes it and joins again)
-- Mixed versions (a rolling deploy): the answer and the refusals pass only between this
-- script and the Go code of the same release (each release runs its own text, by its own
-- SHA), so they may differ between releases. What it writes to Redis (keys, hash fields,
-- stored strings, sorted-set members and scores) is what both releases read: it is the
-- contract between them and keeps its layout (docs/UPGRADING.md says how that is checked).

-- ARGV[2]: give the ticket a place (or return the one it has), or only read its state.
local JOIN, STATUS = '1', '0'

-- refuse answers a named refusal: the code is its first word.
local function refuse(code, detail) return redis.error_reply(code .. ' ' .. detail) end

local idle_flag = nil
local function main()
if redis.call('EXISTS', KEYS[1]) == 0 then return refuse('UNKNOWN_QUEUE', 'no such queue') end
local cf = redis.call('HMGET', KEYS[1], 'closed', 'rate', 'paused', 'places_per_ip', 'pow_difficulty', 'priority_share',
  'method', 'sold_out', 'ended', 'starts_ms', 'draw', 'max_active', 'ttl_ms', 'ends_ms', 'max_active_share_per_ip', 'pq_other',
  'pq_tags')
local closed = cf[1] == '1'
local method = cf[7] or 'fifo'
local sold_out = cf[8] == '1'
local starts = tonumber(cf[10] or '0') or 0
local phase = cf[11] or ''
local rate_milli = math.floor((tonumber(cf[2] or '0') or 0) * 1000)
local paused = cf[3] == '1'
local share_milli = math.floor((tonumber(cf[6] or '0.5') or 0.5) * 1000 + 0.5)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ck = redis.call('HMGET', KEYS[6], 'arate', 'seq_p', 'head_p', 'seq_b', 'head_b', 'tick', 'ptb', 'ptt', 'real_shown', 'idle')
idle_flag = ck[10]
-- What was really admitted per second lately (admit.lua), for the answer's admit_rate.
local real_milli = math.floor((tonumber(ck[9] or ck[1] or '0') or 0) * 1000)
local arate_milli = math.floor((tonumber(ck[1] or '0') or 0) * 1000)
local LW = {p = KEYS[11], b = KEYS[12]}
-- The pre-queue's size while the queue is scheduled (0 otherwise: no command); a sharded
-- one adds the other shards' as the leader last counted them (cfg pq_other).
local function pqsize()
  if phase == PHASE_SCHEDULED then return redis.call('ZCARD', KEYS[15]) + (tonumber(cf[16] or '0') or 0) end
  return 0
end

-- answer completes the answer a with the state and the queue's settings.
local function answer(created, state, a)
  a.created, a.state = created, state
  a.arate_milli, a.real_milli, a.rate_milli, a.share_milli = arate_milli, real_milli, rate_milli, share_milli
  a.paused, a.sold_out, a.method, a.starts_ms = paused, sold_out, method, starts
  return a
end

-- The answer for a waiter of a lane ('' = normal) with sequence seq.
local function waiter(created, seq, lane)
  local w = LW[lane] or KEYS[3]
  local pos = redis.call('ZCOUNT', w, '-inf', seq)
  if phase == PHASE_FROZEN and lane == '' then
    -- The draw is placing the pre-queue: the reserved sequences it has not processed yet
    -- (neither placed in the line nor recorded as departed) are ahead of this place too.
    local d = redis.call('HMGET', KEYS[17], 'base', 'n')
    local base, n = tonumber(d[1] or '0') or 0, tonumber(d[2] or '0') or 0
    if tonumber(seq) > base + n then
      pos = pos + n - redis.call('ZCOUNT', KEYS[3], base + 1, base + n) - redis.call('ZCOUNT', KEYS[13], base + 1, base + n)
    end
  end
  local other = 0
  if lane == '' then
    -- The priority line is empty when its counter has not passed its head (nobody joined
    -- it since the last admission from it): no ZCARD for queues without invites.
    if (tonumber(ck[2] or '0') or 0) > (tonumber(ck[3] or '0') or 0) then other = redis.call('ZCARD', KEYS[11]) end
  elseif lane == 'p' then
    other = redis.call('ZCARD', KEYS[3])
  end
  return answer(created, 'waiting',
    {seq = tonumber(seq), position = pos, waiting = redis.call('ZCARD', w), lane = lane, other_waiting = other})
end

-- The answer for a member of the pre-queue (before the start, or while the draw places it).
local function prequeuer(created)
  return answer(created, 'prequeue', {waiting = redis.call('ZCARD', KEYS[3]), prequeue_size = pqsize()})
end

-- spend_invite checks the invite code ARGV[6] and spends one use, in this same step, so a
-- code of max_uses N makes N places at most however many use it at once. It returns the
-- code's lane ('p' or 'b'), or nil for an unknown, revoked, used-up or expired code.
local function spend_invite()
  local inv = redis.call('HGET', KEYS[9], ARGV[6])
  if not inv then return nil end
  local lane, uses, exp, rest = string.match(inv, '^([pb]):(%d+):(%d+)(.*)$')
  if not lane or tonumber(exp) <= now or tonumber(uses) < 1 then
    redis.call('HDEL', KEYS[9], ARGV[6])
    redis.call('ZREM', KEYS[10], ARGV[6])
    return nil
  end
  if tonumber(uses) == 1 then
    redis.call('HDEL', KEYS[9], ARGV[6])
    redis.call('ZREM', KEYS[10], ARGV[6])
  else
    redis.call('HSET', KEYS[9], ARGV[6], lane .. ':' .. (tonumber(uses) - 1) .. ':' .. exp .. rest)
  end
  return lane
end

-- lane_place gives the ticket a new place at the end of lane ('p' or 'b').
local function lane_place(lane)
  local seq = redis.call('HINCRBY', KEYS[6], 'seq_' .. lane, 1)
  redis.call('ZADD', LW[lane], seq, ARGV[1])
  -- 'w' keeps an instance that does not know lanes reading a waiter (at a wrong position,
  -- docs/UPGRADING.md, mixed versions); the lane goes in the fifth field, which it ignores.
  redis.call('HSET', KEYS[4], ARGV[1], 'w:' .. seq .. ':::' .. lane)
  redis.call('ZADD', KEYS[5], now, ARGV[1])
  return waiter(true, seq, lane)
end

local cur = redis.call('HGET', KEYS[4], ARGV[1])
if cur then
  local st, seq, token, exp, _, iat = string.match(cur, '^(%a):(%d+):?([^:]*):?(%d*):?([^:]*):?(%d*)')
  -- The lane is the last field of a waiting, admitted or expired state ('w:12:::p',
  -- 'a:12:tok:exp:tick:iat:p'); a normal place has none.
  local lane = (st ~= 'u' and string.match(cur, ':([pb])$')) or ''
  if st == 'w' then
    -- GT: a sign of life never shortens the hold of an e-mail registration (mailjoin.lua).
    redis.call('ZADD', KEYS[5], 'GT', now, ARGV[1])
    -- A reload keeps the place (an invite holder's reload spends nothing).
    if lane ~= '' or ARGV[2] == STATUS or ARGV[6] == '' then return waiter(false, seq, lane) end
    -- A normal waiter who brings an invite: a good code moves the place to the code's lane
    -- (a departure from the normal line, published as a leave is); a bad one is refused and
    -- the place kept.
    local ilane = spend_invite()
    if not ilane then return refuse('INVITE_INVALID', 'invite invalid') end
    redis.call('ZREM', KEYS[3], ARGV[1])
    redis.call('ZADD', KEYS[13], seq, seq)
    redis.call('RPUSH', KEYS[14], seq)
    return lane_place(ilane)
  end
  if st == 'q' then
    -- A pre-queue member who brings an invite leaves the draw for the invite's lane (a
    -- bad code is refused and the entry kept). After the freeze the draw records its
    -- reserved sequence as a departure.
    if ARGV[2] == JOIN and ARGV[6] ~= '' then
      local ilane = spend_invite()
      if not ilane then return refuse('INVITE_INVALID', 'invite invalid') end
      redis.call('ZREM', KEYS[15], ARGV[1])
      return lane_place(ilane)
    end
    return prequeuer(false)
  end
  if st == 'a' and tonumber(exp) > now then
    return answer(false, 'admitted', {seq = tonumber(seq), waiting = redis.call('ZCARD', KEYS[3]), token = token,
      exp_ms = tonumber(exp), iat_ms = tonumber(iat) or 0, lane = lane})
  end
  if ARGV[2] == STATUS then
    local name = 'expired'
    if st == 'u' then name = 'used' end
    if st == 'a' then name = 'expired' end
    return answer(false, name, {seq = tonumber(seq), waiting = redis.call('ZCARD', KEYS[3]), lane = lane})
  end
end
if ARGV[2] == STATUS then return refuse('NO_PLACE', 'no place in this queue') end
local ends = tonumber(cf[14] or '0') or 0
if cf[9] == '1' or (ends > 0 and now >= ends) then return refuse('ENDED', 'the sale has ended') end
if method == 'reject' then return refuse('NOT_OPEN', 'the sale is not open') end
if closed then return refuse('CLOSED', 'closed to new joiners') end
if sold_out then return refuse('SOLD_OUT', 'sold out') end

-- An invite: checked and one use spent in this same step, so a code of max_uses N makes N
-- places at most however many use it at once. Its holder needs no proof of work and is not
-- counted against the address cap (the code is the admission ticket the operator gave).
if ARGV[6] ~= '' then
  local lane = spend_invite()
  if not lane then return refuse('INVITE_INVALID', 'invite invalid') end
  return lane_place(lane)
end

-- A sharded pre-queue's entries are in its shards only (pjoin.lua), where a reload finds them
-- by the ticket: a caller that did not know it was sharded reads the shards and joins there
-- (before any proof or cap is spent here).
if phase == PHASE_SCHEDULED and now < starts and (cf[17] or '') ~= '' then
  return refuse('SHARDED', 'the pre-queue is sharded')
end
-- Proof of work, for new places only (a reload of a live place costs nothing). The proof
-- was verified by the caller; here it is checked against the live difficulty, and recorded
-- (below, once the place is sure) so that each challenge makes one place at most.
local need = tonumber(cf[5] or '0') or 0
if need > 0 then
  if ARGV[4] == '' then return refuse('POW_REQUIRED', math.floor(need) .. ' bits') end
  if (tonumber(ARGV[4]) or 0) < need then return refuse('POW_TOO_EASY', math.floor(need) .. ' bits') end
end
-- The per-address cap (places.go; the rule is places.lua's): places_per_ip and, where
-- max_active is set, a share of it; an admitted place keeps counting while its token lives,
-- an invite place never counts. The key expires a day after the address last joined (no token
-- lives longer). Places taken while the cap was 0 are not counted when a cap is set later.
local cap = address_cap(cf[4], cf[12], cf[15])
if ARGV[3] ~= '' and cap > 0 and address_full(KEYS[7], KEYS[4], cap, now) then
  return refuse('TOO_MANY_PLACES', 'too many places from this address')
end
-- After the cap: a proof refused for the cap is not spent. The challenge's expiry is
-- checked on Redis time, and its record kept until then, so instances whose clocks
-- disagree cannot use one challenge twice.
if need > 0 then
  local cexp = tonumber(ARGV[5]) or 0
  if cexp <= now then return refuse('POW_INVALID', 'the challenge has expired') end
  if not redis.call('SET', KEYS[8], '1', 'NX', 'PX', cexp - now) then return refuse('POW_INVALID', 'the challenge was used') end
end

-- A scheduled queue before its start: the place is in the pre-queue, drawn at the start. It
-- counts against the address cap like any place (scored last: its sequence is not known
-- yet); it needs no sign of life before the start.
if phase == PHASE_SCHEDULED and now < starts then
  local idx = redis.call('HINCRBY', KEYS[17], 'joins', 1)
  redis.call('ZADD', KEYS[15], idx, ARGV[1])
  redis.call('HSET', KEYS[4], ARGV[1], 'q:' .. idx)
  if ARGV[3] ~= '' and cap > 0 then
    redis.call('ZADD', KEYS[7], 9e15, ARGV[1])
    redis.call('PEXPIRE', KEYS[7], 86400000)
  end
  return prequeuer(true)
end
if phase == PHASE_SCHEDULED then
  -- A sharded pre-queue is frozen by queue/prequeue.go (it counts the other shards first):
  -- the caller runs that freeze and tries again.
  if not freeze(KEYS[1], KEYS[2], KEYS[15], KEYS[16], KEYS[17], now) then
    return refuse('STARTING', 'the draw is starting')
  end
  phase = PHASE_FROZEN
end

local seq = redis.call('INCR', KEYS[2])
if ARGV[3] ~= '' and cap > 0 then -- with no cap nothing is counted (no key grows)
  redis.call('ZADD', KEYS[7], seq, ARGV[1])
  redis.call('PEXPIRE', KEYS[7], 86400000)
end

-- passthrough: while nobody waits (in any line), max_active allows and the rate allows (a
-- token bucket of one second's worth, refilled at the rate), the join itself admits. Every
-- sequence up to this one has then left the line, so the head moves to it.
if method == 'passthrough' and phase ~= PHASE_FROZEN and not paused and not sold_out then
  local max_active = tonumber(cf[12] or '0') or 0
  local idle = (tonumber(ck[2] or '0') or 0) <= (tonumber(ck[3] or '0') or 0) and
    (tonumber(ck[4] or '0') or 0) <= (tonumber(ck[5] or '0') or 0)
  if max_active > 0 and idle and redis.call('ZCARD', KEYS[3]) == 0 and redis.call('ZCARD', KEYS[18]) < max_active then
    local rate = rate_milli / 1000
    local size = math.max(1, rate)
    local bucket = size
    if ck[7] then bucket = math.min(size, (tonumber(ck[7]) or 0) + rate * (now - (tonumber(ck[8]) or now)) / 1000) end
    if bucket >= 1 then
      local ttl = tonumber(cf[13] or '300000') or 300000
      local exp = now + ttl
      local tick = tonumber(ck[6] or '0') or 0
      redis.call('SET', KEYS[20], ARGV[1], 'PX', ttl)
      redis.call('HSET', KEYS[4], ARGV[1], 'a:' .. seq .. ':' .. ARGV[7] .. ':' .. exp .. ':' .. tick .. ':' .. now)
      redis.call('ZADD', KEYS[18], exp, ARGV[1])
      redis.call('ZADD', KEYS[19], exp + 86400000, ARGV[1])
      redis.call('HSET', KEYS[6], 'head', seq, 'ptb', bucket - 1, 'ptt', now)
      redis.call('HINCRBY', KEYS[6], 'total', 1)
      redis.call('ZREMRANGEBYSCORE', KEYS[13], '-inf', seq)
      return answer(true, 'admitted', {seq = seq, token = ARGV[7], exp_ms = exp, iat_ms = now, lane = ''})
    end
    redis.call('HSET', KEYS[6], 'ptb', bucket, 'ptt', now)
  end
end

redis.call('ZADD', KEYS[3], seq, ARGV[1])
redis.call('HSET', KEYS[4], ARGV[1], 'w:' .. seq)
redis.call('ZADD', KEYS[5], now, ARGV[1])
return waiter(true, seq, '')
end
local r = main()
if r.err then return r end -- a refusal
-- Every new place is counted (clock joins: the queue's joined total, for its history).
if r.created then redis.call('HINCRBY', KEYS[6], 'joins', 1) end
-- A new place in a resting queue ends the rest (the caller wakes the loops).
if r.created and idle_flag == '1' then
  redis.call('HDEL', KEYS[6], 'idle')
  r.woke = true
end
return cjson.encode(r)
