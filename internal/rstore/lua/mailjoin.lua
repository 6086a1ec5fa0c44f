-- mailjoin.lua: a waiting place registers an e-mail address for its reminders.
-- KEYS[1] tickets  HASH   ticket -> "state:seq[:…]" (queue/state.go)
-- KEYS[2] seen     ZSET   ticket -> last sign of life (ms), for abandonment
-- KEYS[3] mailq    ZSET   registered tickets of the normal line with no message yet -> sequence
-- KEYS[4] mailnear ZSET   tickets waiting only for the turn's message -> sequence (0: a lane)
-- KEYS[5] mail     STRING the ticket's registration
-- ARGV[1] ticket id   ARGV[2] the registration (JSON, stored as it is)   ARGV[3] hold ms
-- The place's sign of life is set hold ms into the future (never moved back: touch.lua and
-- join.lua write with GT), so admit.lua's abandonment sweep leaves it alone until then; the
-- registration lives as long. An invite holder's place (lane p or b) has its own
-- numbering: it is told only at the turn. A place already told it is near keeps that.
-- Answers 1, or the refusal NOT_WAITING when the ticket has no waiting place here (Go:
-- notify.ErrNotWaiting).
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur or string.sub(cur, 1, 2) ~= 'w:' then
  return redis.error_reply('NOT_WAITING the ticket has no waiting place')
end
local seq = tonumber(string.match(cur, '^w:(%d+)')) or 0
local lane = string.match(cur, ':([pb])$')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local hold = tonumber(ARGV[3])
redis.call('SET', KEYS[5], ARGV[2], 'PX', hold)
redis.call('ZADD', KEYS[2], 'XX', 'GT', now + hold, ARGV[1])
if lane then
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('ZADD', KEYS[4], 0, ARGV[1])
elseif not redis.call('ZSCORE', KEYS[4], ARGV[1]) then
  redis.call('ZADD', KEYS[3], seq, ARGV[1])
end
-- The indexes go with the last registration: a queue nobody registers in any more drops them.
redis.call('PEXPIRE', KEYS[3], hold)
redis.call('PEXPIRE', KEYS[4], hold)
return 1
