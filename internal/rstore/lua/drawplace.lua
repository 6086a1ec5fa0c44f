-- drawplace.lua: give one batch of drawn pre-queue members their places (the draw, see
-- schedule.go). Idempotent, so a leader that takes over mid-draw simply runs the whole
-- draw again: a member already placed keeps its place, and nobody is placed twice.
-- KEYS[1] lease  KEYS[2] fence  KEYS[3] tickets  KEYS[4] waiting  KEYS[5] seen
-- KEYS[6] gone   KEYS[7] gonenew  KEYS[8] draw
-- KEYS[9…] the per-address place sets (places:<client>) of members from other shards
-- ARGV[1] owner  ARGV[2] fencing token  ARGV[3] how many members are placed after this batch
-- ARGV[4…] triples: ticket, sequence (the sequences the freeze reserved, in drawn order),
--   where: '' a member of this slot's pre-queue (its row here says 'q:'); for a member of
--   another shard of a sharded pre-queue (its row there marked moved by ptake.lua): 'x' it
--   left, '=<i>' it is there, i the index in KEYS of its address's place set (0: none)
-- Returns the number placed by this call, or -1 when fenced off.
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return -1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local placed = 0
for i = 4, #ARGV, 3 do
  local tk, seq, where = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local cur = redis.call('HGET', KEYS[3], tk)
  local place = false
  if where == '' then
    place = cur and string.sub(cur, 1, 2) == 'q:'
  elseif string.sub(where, 1, 1) == '=' then
    -- From another shard: placed unless this slot has a row for it (placed already, or
    -- another place the ticket took meanwhile, e.g. an invite's).
    place = not cur
    local pk = tonumber(string.sub(where, 2)) or 0
    if place and pk > 0 then
      redis.call('ZADD', KEYS[pk], seq, tk)
      redis.call('PEXPIRE', KEYS[pk], 86400000)
    end
  end
  if place then
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
