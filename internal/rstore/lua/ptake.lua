-- ptake.lua: one batch of the draw, on a shard of a sharded pre-queue: mark each drawn
-- ticket's entry as moved to the line with its reserved sequence, before drawplace.lua
-- places it on the queue's slot (queue/schedule.go). Idempotent: a leader that takes over
-- mid-draw runs it again and finds the entries it marked.
-- KEYS[1] tickets
-- ARGV pairs: ticket, sequence
-- Returns, per ticket, '=' .. its client address key when it is still an entry (or marked
-- already), 'x' when it left.
local out = {}
for i = 1, #ARGV, 2 do
  local tk, seq = ARGV[i], ARGV[i + 1]
  local cur = redis.call('HGET', KEYS[1], tk)
  local q, addr = nil, nil
  if cur then q, addr = string.match(cur, '^([qm]):%d+:(.*)$') end
  if q == 'q' then
    redis.call('HSET', KEYS[1], tk, 'm:' .. seq .. ':' .. addr)
    out[#out + 1] = '=' .. addr
  elseif q == 'm' then
    out[#out + 1] = '=' .. addr
  else
    out[#out + 1] = 'x'
  end
end
return out
