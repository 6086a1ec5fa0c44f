-- join.lua: give a ticket its place in line, or return the place it already has.
-- KEYS[1] cfg      HASH  queue settings (missing = unknown queue)
-- KEYS[2] seq      STRING last sequence number handed out
-- KEYS[3] waiting  ZSET  ticket -> sequence
-- KEYS[4] tickets  HASH  ticket -> "state:seq[:token:exp_ms:tick]"
-- KEYS[5] seen     ZSET  ticket -> last sign of life (ms), for abandonment
-- KEYS[6] clock    HASH  admission state (head, measured rate)
-- KEYS[7] places   ZSET  the places of one client address: ticket -> sequence (unused
--                        when ARGV[3] is empty)
-- ARGV[1] ticket id
-- ARGV[2] "1" to join, "0" to only read the state (status)
-- KEYS[8] pow      STRING the single-use record of the presented proof-of-work challenge
-- ARGV[3] the client address key ("" = not capped)
-- ARGV[4] difficulty of the verified proof-of-work challenge presented ("" = none)
-- ARGV[5] how long the challenge record is kept (ms; until the challenge expires)
-- Returns {code, seq, position, waiting, arate_milli, token, exp_ms, state, rate_milli, paused,
--          iat_ms}
--   code: 0 new place, 1 existing place, -1 unknown queue, -2 closed, -3 no place (status
--   only), -4 the address holds places_per_ip live places already, -5 a new place needs a
--   proof of work and none came, -6 the proof is for a lower difficulty than the queue's
--   (-5 and -6 return {code, difficulty}), -7 the challenge was used already
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
local cf = redis.call('HMGET', KEYS[1], 'closed', 'rate', 'paused', 'places_per_ip', 'pow_difficulty')
local closed = cf[1] == '1'
local rate_milli = math.floor((tonumber(cf[2] or '0') or 0) * 1000)
local paused = (cf[3] == '1') and 1 or 0
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local arate = tonumber(redis.call('HGET', KEYS[6], 'arate') or '0')
local cur = redis.call('HGET', KEYS[4], ARGV[1])
if cur then
  local st, seq, token, exp, _, iat = string.match(cur, '^(%a):(%d+):?([^:]*):?(%d*):?([^:]*):?(%d*)')
  if st == 'w' then
    redis.call('ZADD', KEYS[5], now, ARGV[1])
    local pos = redis.call('ZCOUNT', KEYS[3], '-inf', seq)
    return {1, tonumber(seq), pos, redis.call('ZCARD', KEYS[3]), math.floor(arate * 1000), '', 0, 'waiting', rate_milli, paused}
  end
  if st == 'a' and tonumber(exp) > now then
    return {1, tonumber(seq), 0, redis.call('ZCARD', KEYS[3]), math.floor(arate * 1000), token, tonumber(exp), 'admitted', rate_milli, paused, tonumber(iat) or 0}
  end
  if ARGV[2] == '0' then
    local name = 'expired'
    if st == 'u' then name = 'used' end
    if st == 'a' then name = 'expired' end
    return {1, tonumber(seq), 0, redis.call('ZCARD', KEYS[3]), math.floor(arate * 1000), '', 0, name, rate_milli, paused}
  end
end
if ARGV[2] == '0' then return {-3} end
if closed then return {-2} end
-- Proof of work, for new places only (a reload of a live place costs nothing). The proof
-- was verified by the caller; here it is checked against the live difficulty and recorded,
-- so each challenge makes one place at most.
local need = tonumber(cf[5] or '0') or 0
if need > 0 then
  if ARGV[4] == '' then return {-5, need} end
  if (tonumber(ARGV[4]) or 0) < need then return {-6, need} end
  if not redis.call('SET', KEYS[8], '1', 'NX', 'PX', ARGV[5]) then return {-7} end
end
-- The per-address cap. Places are admitted in sequence order, so every place of the address
-- at or below the head has left the line (admitted, left or abandoned) and is dropped here;
-- one that left ahead of the head still counts until the head passes it (stricter, never
-- looser). The key expires a day after the address last joined. Places taken while the
-- cap was 0 are not counted when a cap is set later.
local cap = tonumber(cf[4] or '100') or 100
if ARGV[3] ~= '' and cap > 0 then
  local head = tonumber(redis.call('HGET', KEYS[6], 'head') or '0') or 0
  redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', head)
  if redis.call('ZCARD', KEYS[7]) >= cap then return {-4} end
end
local seq = redis.call('INCR', KEYS[2])
if ARGV[3] ~= '' and cap > 0 then -- with no cap nothing is counted (no key grows)
  redis.call('ZADD', KEYS[7], seq, ARGV[1])
  redis.call('PEXPIRE', KEYS[7], 86400000)
end
redis.call('ZADD', KEYS[3], seq, ARGV[1])
redis.call('HSET', KEYS[4], ARGV[1], 'w:' .. seq)
redis.call('ZADD', KEYS[5], now, ARGV[1])
local pos = redis.call('ZCOUNT', KEYS[3], '-inf', seq)
return {0, seq, pos, redis.call('ZCARD', KEYS[3]), math.floor(arate * 1000), '', 0, 'waiting', rate_milli, paused}
