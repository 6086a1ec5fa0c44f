-- snapshot.lua: the state a stream instance resynchronises from after a gap or a
-- (re)subscribe; read atomically so it matches exactly one event number.
-- KEYS[1] ev     STRING event counter
-- KEYS[2] clock  HASH   head, arate, tick
-- KEYS[3] gone   ZSET   departed sequences ahead of the head
-- KEYS[4] seq    STRING last sequence handed out
-- KEYS[5] cfg    HASH   rate, paused
-- KEYS[6] waiting ZSET
-- Returns {ev, head, tail, tick, arate_milli, rate_milli, paused, waiting, gone...}
local c = redis.call('HMGET', KEYS[2], 'head', 'arate', 'tick')
local cfg = redis.call('HMGET', KEYS[5], 'rate', 'paused')
local out = {
  tonumber(redis.call('GET', KEYS[1]) or '0'),
  tonumber(c[1] or '0'),
  tonumber(redis.call('GET', KEYS[4]) or '0'),
  tonumber(c[3] or '0'),
  math.floor((tonumber(c[2] or '0') or 0) * 1000),
  math.floor((tonumber(cfg[1] or '0') or 0) * 1000),
  (cfg[2] == '1') and 1 or 0,
  redis.call('ZCARD', KEYS[6]),
}
for _, s in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do out[#out + 1] = tonumber(s) end
return out
