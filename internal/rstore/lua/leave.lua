-- leave.lua: take a waiting ticket out of the line (leave or abandonment).
-- The departure is recorded for the next tick message, which publishes it.
-- KEYS[1]  waiting   ZSET  ticket -> sequence (the normal line)
-- KEYS[2]  tickets   HASH  ticket -> state
-- KEYS[3]  gone      ZSET  departed sequences still ahead of the head
-- KEYS[4]  gonenew   LIST  departures not yet published
-- KEYS[5]  seen      ZSET  ticket -> last sign of life
-- KEYS[6]  active    ZSET  admitted ticket -> token expiry (max_active)
-- KEYS[7]  token     STRING the ticket's token key ("" state when not admitted)
-- KEYS[8]  waiting:p ZSET  the priority line; KEYS[9] gone:p, KEYS[10] gonenew:p (as above)
-- KEYS[11] waiting:b ZSET  the bypass line;   KEYS[12] gone:b, KEYS[13] gonenew:b
-- KEYS[14] pre       ZSET  the pre-queue (a member leaving before the start leaves it; one
--                          leaving after the freeze stays in the frozen list, and the draw
--                          records its reserved sequence as a departure)
-- KEYS[15] clock     HASH  left_n counts the places given up here (history, analytics)
-- ARGV[1] ticket id
-- ARGV[2] token the caller believes the ticket holds ("" when waiting)
-- Returns 1 when a place or token was given up, 0 when the ticket had none, -1 when the
-- ticket holds another token than ARGV[2] (admitted meanwhile: the caller retries).
local cur = redis.call('HGET', KEYS[2], ARGV[1])
-- A waiter of an invite lane is 'w:<seq>:::<lane>' (state.go); its departure is recorded
-- in that lane's own bookkeeping, since its sequence is the lane's.
local w, g, gn = KEYS[1], KEYS[3], KEYS[4]
local lane = cur and string.match(cur, '^w:%d+:[^:]*:[^:]*:([pb])$')
if lane == 'p' then
  w, g, gn = KEYS[8], KEYS[9], KEYS[10]
elseif lane == 'b' then
  w, g, gn = KEYS[11], KEYS[12], KEYS[13]
end
if cur and string.sub(cur, 1, 2) == 'q:' then
  redis.call('ZREM', KEYS[14], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HINCRBY', KEYS[15], 'left_n', 1)
  return 1
end
local seq = redis.call('ZSCORE', w, ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
if seq then
  redis.call('ZREM', w, ARGV[1])
  redis.call('ZADD', g, seq, seq)
  redis.call('RPUSH', gn, seq)
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HINCRBY', KEYS[15], 'left_n', 1)
  return 1
end
if cur and string.sub(cur, 1, 2) == 'a:' and string.match(cur, '^a:%d+:([^:]*)') ~= ARGV[2] then
  return -1 -- admitted since the caller read the token: read again and retry
end
if cur and ARGV[2] ~= '' and string.sub(cur, 1, 2) == 'a:' then
  if redis.call('GET', KEYS[7]) == ARGV[1] then redis.call('DEL', KEYS[7]) end
  redis.call('ZREM', KEYS[6], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
  return 1
end
if cur then redis.call('HDEL', KEYS[2], ARGV[1]) return 1 end
return 0
