-- end.lua: end a queue's sale at ends_at: no more joins, and every place (waiting, in a lane
-- or in the pre-queue) is dropped, in batches so Redis is never blocked long. Tokens already
-- handed out stay valid until they expire.
-- KEYS[1] lease  KEYS[2] fence  KEYS[3] cfg  KEYS[4] tickets  KEYS[5] seen
-- KEYS[6] waiting  KEYS[7] waiting:p  KEYS[8] waiting:b  KEYS[9] pre  KEYS[10] drawset
-- KEYS[11] gone  KEYS[12] gonenew  KEYS[13] gone:p  KEYS[14] gonenew:p  KEYS[15] gone:b
-- KEYS[16] gonenew:b  KEYS[17] clock  KEYS[18] seq
-- (clock dropped_n: the running total of the places dropped here, for the history.)
-- ARGV[1] owner  ARGV[2] fencing token  ARGV[3] places dropped per call
-- Returns the number of places left to drop (0: the line is ended), or -1 when fenced off.
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return -1
end
redis.call('HSET', KEYS[3], 'ended', '1')
local limit = tonumber(ARGV[3])
local left = 0
local dropped = 0
for _, z in ipairs({KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]}) do
  local ms = {}
  if limit > 0 then ms = redis.call('ZRANGE', z, 0, limit - 1) end
  for _, tk in ipairs(ms) do
    local cur = redis.call('HGET', KEYS[4], tk)
    if cur and (string.sub(cur, 1, 2) == 'w:' or string.sub(cur, 1, 2) == 'q:') then
      redis.call('HDEL', KEYS[4], tk)
      dropped = dropped + 1
    end
  end
  if #ms > 0 then redis.call('ZREM', z, unpack(ms)) end
  limit = limit - #ms
  left = left + redis.call('ZCARD', z)
end
if dropped > 0 then redis.call('HINCRBY', KEYS[17], 'dropped_n', dropped) end
if left > 0 then return left end
redis.call('DEL', KEYS[5], KEYS[11], KEYS[12], KEYS[13], KEYS[14], KEYS[15], KEYS[16])
-- Every sequence has left the line: the heads move to the tails.
local c = redis.call('HMGET', KEYS[17], 'seq_p', 'seq_b')
redis.call('HSET', KEYS[17], 'head', tonumber(redis.call('GET', KEYS[18]) or '0') or 0,
  'head_p', tonumber(c[1] or '0') or 0, 'head_b', tonumber(c[2] or '0') or 0)
return 0
