-- ptake.lua: one batch of the draw, on a shard of a sharded pre-queue: mark each drawn
-- ticket's entry as moved to the line with its reserved sequence, before drawplace.lua
-- places it on the queue's slot (queue/schedule.go). Idempotent: a leader that takes over
-- mid-draw runs it again and finds the entries it marked.
-- KEYS[1] tickets
-- ARGV pairs: ticket, sequence
-- Returns, per ticket, '=' .. its client address key when it is still an entry (or marked
-- already), 'x' when it left.
-- The rows are read at once and the marks written with one HSET per chunk (bulk.lua, as
-- drawplace.lua; no ticket appears twice in a batch).
local tks = {}
for i = 1, #ARGV, 2 do tks[#tks + 1] = ARGV[i] end
local rows = bulk_hmget(KEYS[1], tks)
local out, marks = {}, {}
for j, tk in ipairs(tks) do
  local cur = rows[j]
  local q, addr = nil, nil
  if cur then q, addr = string.match(cur, '^([qm]):%d+:(.*)$') end
  if q == 'q' then
    marks[#marks + 1] = tk
    marks[#marks + 1] = 'm:' .. ARGV[2 * j] .. ':' .. addr
    out[#out + 1] = '=' .. addr
  elseif q == 'm' then
    out[#out + 1] = '=' .. addr
  else
    out[#out + 1] = 'x'
  end
end
bulk_call('HSET', KEYS[1], marks)
return out
