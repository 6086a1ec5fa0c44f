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
--
-- The batch's rows are read at once and its writes made with one variadic command per key
-- (bulk.lua): a batch of 5,000 is a handful of commands, not 20,000. No ticket appears twice
-- in a batch (the draw's order is a permutation), so reading first and writing after is what
-- one member at a time did.
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return -1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tks = {}
for i = 4, #ARGV, 3 do tks[#tks + 1] = ARGV[i] end
local rows = bulk_hmget(KEYS[3], tks)
local rowsW, waitW, seenW, goneW, newW = {}, {}, {}, {}, {}
local places, pks = {}, {} -- KEYS index -> {seq, ticket, …}; the indexes in first-seen order
local placed = 0
for j, tk in ipairs(tks) do
  local seq, where = ARGV[3 + 3 * j - 1], ARGV[3 + 3 * j]
  local cur = rows[j]
  local place = false
  if where == '' then
    place = cur and string.sub(cur, 1, 2) == 'q:'
  elseif string.sub(where, 1, 1) == '=' then
    -- From another shard: placed unless this slot has a row for it (placed already, or
    -- another place the ticket took meanwhile, e.g. an invite's).
    place = not cur
    local pk = tonumber(string.sub(where, 2)) or 0
    if place and pk > 0 then
      local l = places[pk]
      if not l then
        l = {}
        places[pk] = l
        pks[#pks + 1] = pk
      end
      l[#l + 1] = seq
      l[#l + 1] = tk
    end
  end
  if place then
    rowsW[#rowsW + 1] = tk
    rowsW[#rowsW + 1] = 'w:' .. seq
    waitW[#waitW + 1] = seq
    waitW[#waitW + 1] = tk
    -- The presence grace starts now, at the start.
    seenW[#seenW + 1] = now
    seenW[#seenW + 1] = tk
    placed = placed + 1
  elseif not (cur and cur == 'w:' .. seq) then
    -- Left after the freeze: its reserved sequence is a departure, so everyone behind it
    -- moves up. (ZADD is idempotent; a repeated departure in gonenew is harmless.)
    goneW[#goneW + 1] = seq
    goneW[#goneW + 1] = seq
    newW[#newW + 1] = seq
  end
end
for _, pk in ipairs(pks) do
  bulk_call('ZADD', KEYS[pk], places[pk])
  redis.call('PEXPIRE', KEYS[pk], 86400000)
end
bulk_call('HSET', KEYS[3], rowsW)
bulk_call('ZADD', KEYS[4], waitW)
bulk_call('ZADD', KEYS[5], seenW)
bulk_call('ZADD', KEYS[6], goneW)
bulk_call('RPUSH', KEYS[7], newW)
redis.call('HSET', KEYS[8], 'placed', ARGV[3])
return placed
