-- mailscan.lua: which reminders are due in one queue, each claimed once.
-- KEYS[1] mailq    ZSET  registered tickets of the normal line with no message yet -> sequence
-- KEYS[2] mailnear ZSET  tickets waiting only for the turn's message -> sequence (0: a lane)
-- KEYS[3] tickets  HASH  ticket -> "state:seq[:token:exp_ms:…]" (queue/state.go)
-- KEYS[4] clock    HASH  head: the normal line's highest admitted sequence
-- ARGV[1] near: a place this close to the door (sequence − head ≤ near) is told it is near
-- ARGV[2] limit: most tickets looked at in each index
-- Claims are the moves between the indexes: a ticket told it is near leaves mailq for
-- mailnear, a ticket told its turn leaves both, in this one atomic step. Two scans (an old
-- and a new leader) thus never claim the same message.
-- sequence − head is never below the place's position (departures ahead only lower the
-- position), so the near message goes at position ≤ near, at the latest when
-- sequence − head reaches near.
-- Answers a JSON object (cjson; Go: scanAnswer in notify/store.go):
--   near  tickets now near the door      turn  [{t = ticket, x = token expiry ms}]
--   gone  tickets whose place has ended (left, abandoned, dropped, token lapsed): the
--         caller deletes their registrations
local near, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local head = tonumber(redis.call('HGET', KEYS[4], 'head') or '0') or 0
local out = {near = {}, turn = {}, gone = {}}
-- cjson writes an empty table as {}: the caller reads a missing or empty list alike.
local function state(tk)
  local cur = redis.call('HGET', KEYS[3], tk)
  if not cur then return 'gone' end
  local c = string.sub(cur, 1, 2)
  if c == 'w:' then
    if string.match(cur, ':[pb]$') then return 'lane' end
    return 'waiting'
  end
  if c == 'a:' then return 'admitted', tonumber(string.match(cur, '^a:%d+:[^:]*:(%d+)')) or 0 end
  return 'gone'
end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', head + near, 'WITHSCORES', 'LIMIT', 0, limit)
for i = 1, #due, 2 do
  local tk, seq = due[i], due[i + 1]
  local st, exp = state(tk)
  redis.call('ZREM', KEYS[1], tk)
  if st == 'waiting' then
    redis.call('ZADD', KEYS[2], seq, tk)
    out.near[#out.near + 1] = tk
  elseif st == 'lane' then
    redis.call('ZADD', KEYS[2], 0, tk)
  elseif st == 'admitted' then
    out.turn[#out.turn + 1] = {t = tk, x = exp}
  else
    out.gone[#out.gone + 1] = tk
  end
end
for _, tk in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', head, 'LIMIT', 0, limit)) do
  local st, exp = state(tk)
  if st == 'admitted' then
    redis.call('ZREM', KEYS[2], tk)
    out.turn[#out.turn + 1] = {t = tk, x = exp}
  elseif st == 'gone' then
    redis.call('ZREM', KEYS[2], tk)
    out.gone[#out.gone + 1] = tk
  end
end
for _, k in ipairs({'near', 'turn', 'gone'}) do
  if #out[k] == 0 then out[k] = nil end
end
return cjson.encode(out)
