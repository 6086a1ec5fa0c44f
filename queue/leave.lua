-- leave.lua: take a waiting ticket out of the line (leave or abandonment).
-- The departure is recorded for the next tick message, which publishes it.
-- KEYS[1] waiting  ZSET  ticket -> sequence
-- KEYS[2] tickets  HASH  ticket -> state
-- KEYS[3] gone     ZSET  departed sequences still ahead of the head
-- KEYS[4] gonenew  LIST  departures not yet published
-- KEYS[5] seen     ZSET  ticket -> last sign of life
-- KEYS[6] active   ZSET  admitted ticket -> token expiry (max_active)
-- KEYS[7] token    STRING the ticket's token key ("" state when not admitted)
-- ARGV[1] ticket id
-- ARGV[2] token the caller believes the ticket holds ("" when waiting)
-- Returns 1 when a place or token was given up, 0 when the ticket had none, -1 when the
-- ticket holds another token than ARGV[2] (admitted meanwhile: the caller retries).
local seq = redis.call('ZSCORE', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
if seq then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('ZADD', KEYS[3], seq, seq)
  redis.call('RPUSH', KEYS[4], seq)
  redis.call('HDEL', KEYS[2], ARGV[1])
  return 1
end
local cur = redis.call('HGET', KEYS[2], ARGV[1])
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
