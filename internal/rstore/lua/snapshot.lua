-- snapshot.lua: the state a stream instance resynchronises from after a gap or a
-- (re)subscribe; read atomically so it matches exactly one event number.
-- KEYS[1]  ev        STRING event counter
-- KEYS[2]  clock     HASH   head, arate, tick; seq_p/head_p, seq_b/head_b (invite lanes)
-- KEYS[3]  gone      ZSET   departed sequences ahead of the head
-- KEYS[4]  seq       STRING last sequence handed out
-- KEYS[5]  cfg       HASH   rate, paused, priority_share
-- KEYS[6]  waiting   ZSET
-- KEYS[7]  gone:p    ZSET   the priority line's departed sequences ahead of its head
-- KEYS[8]  waiting:p ZSET
-- KEYS[9]  gone:b    ZSET   the bypass line's
-- KEYS[10] waiting:b ZSET
-- KEYS[11] pre       ZSET   the pre-queue   KEYS[12] draw HASH the draw's record (base, n)
-- Returns {ev, head, tail, tick, arate_milli, rate_milli, paused, waiting, share_micro,
--          p_head, p_tail, p_waiting, p_ngone, b_head, b_tail, b_waiting, b_ngone,
--          starts_ms, prequeue, phase (0 none, 1 s, 2 f, 3 d), base, n, sold_out, method
--          (0 fifo, 1 random, 2 passthrough, 3 reject), ended, real_milli,
--          p_gone..., b_gone..., gone...}
local c = redis.call('HMGET', KEYS[2], 'head', 'arate', 'tick', 'head_p', 'seq_p', 'head_b', 'seq_b')
local cfg = redis.call('HMGET', KEYS[5], 'rate', 'paused', 'priority_share')
local out = {
  tonumber(redis.call('GET', KEYS[1]) or '0'),
  tonumber(c[1] or '0'),
  tonumber(redis.call('GET', KEYS[4]) or '0'),
  tonumber(c[3] or '0'),
  math.floor((tonumber(c[2] or '0') or 0) * 1000),
  math.floor((tonumber(cfg[1] or '0') or 0) * 1000),
  (cfg[2] == '1') and 1 or 0,
  redis.call('ZCARD', KEYS[6]),
  math.floor((tonumber(cfg[3] or '0.5') or 0.5) * 1000000 + 0.5),
}
-- A lane whose counter has not passed its head is empty and has no departures to keep.
local gones = {}
for i, lk in ipairs({{h = c[4], t = c[5], g = KEYS[7], w = KEYS[8]}, {h = c[6], t = c[7], g = KEYS[9], w = KEYS[10]}}) do
  local head, tail = tonumber(lk.h or '0') or 0, tonumber(lk.t or '0') or 0
  local waiting, g = 0, {}
  if tail > head then
    waiting = redis.call('ZCARD', lk.w)
    g = redis.call('ZRANGE', lk.g, 0, -1)
  end
  out[#out + 1] = head
  out[#out + 1] = tail
  out[#out + 1] = waiting
  out[#out + 1] = #g
  gones[i] = g
end
local sc = redis.call('HMGET', KEYS[5], 'starts_ms', 'draw', 'sold_out', 'method', 'ended')
local phase = sc[2] or ''
local pq, base, n = 0, 0, 0
if phase == 's' then pq = redis.call('ZCARD', KEYS[11]) end
if phase ~= '' then
  local d = redis.call('HMGET', KEYS[12], 'base', 'n')
  base, n = tonumber(d[1] or '0') or 0, tonumber(d[2] or '0') or 0
end
out[#out + 1] = tonumber(sc[1] or '0') or 0
out[#out + 1] = pq
out[#out + 1] = ({s = 1, f = 2, d = 3})[phase] or 0
out[#out + 1] = base
out[#out + 1] = n
out[#out + 1] = (sc[3] == '1') and 1 or 0
out[#out + 1] = ({random = 1, passthrough = 2, reject = 3})[sc[4] or ''] or 0
out[#out + 1] = (sc[5] == '1') and 1 or 0
out[#out + 1] = math.floor((tonumber(redis.call('HGET', KEYS[2], 'real_shown') or '0') or 0) * 1000)
for _, g in ipairs(gones) do
  for _, s in ipairs(g) do out[#out + 1] = tonumber(s) end
end
for _, s in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do out[#out + 1] = tonumber(s) end
return out
