-- drawplace.lua: give one batch of drawn pre-queue members their places (the draw, see
-- schedule.go). Idempotent, so a leader that takes over mid-draw simply runs the whole
-- draw again: a member already placed keeps its place, and nobody is placed twice.
-- KEYS[1] lease  KEYS[2] fence  KEYS[3] tickets  KEYS[4] waiting  KEYS[5] seen
-- KEYS[6] gone   KEYS[7] gonenew  KEYS[8] draw
-- ARGV[1] owner  ARGV[2] fencing token  ARGV[3] how many members are placed after this batch
-- ARGV[4…] pairs: ticket, sequence (the sequences the freeze reserved, in drawn order)
-- Returns the number placed by this call, or -1 when fenced off.
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return -1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local placed = 0
for i = 4, #ARGV, 2 do
  local tk, seq = ARGV[i], ARGV[i + 1]
  local cur = redis.call('HGET', KEYS[3], tk)
  if cur and string.sub(cur, 1, 2) == 'q:' then
    redis.call('HSET', KEYS[3], tk, 'w:' .. seq)
    redis.call('ZADD', KEYS[4], seq, tk)
    -- The presence grace starts now, at the start.
    redis.call('ZADD', KEYS[5], now, tk)
    placed = placed + 1
  elseif not (cur and cur == 'w:' .. seq) then
    -- Left after the freeze: its reserved sequence is a departure, so everyone behind it
    -- moves up. (ZADD is idempotent; a repeated departure in gonenew is harmless.)
    redis.call('ZADD', KEYS[6], seq, seq)
    redis.call('RPUSH', KEYS[7], seq)
  end
end
redis.call('HSET', KEYS[8], 'placed', ARGV[3])
return placed
