-- pleave.lua: give up an entry of a sharded pre-queue's shard (queue/prequeue.go).
-- Before the start the entry leaves the shard's pre-queue; after the freeze it stays in the
-- frozen list and the draw records its reserved sequence as a departure (its row is gone).
-- KEYS[1] tickets  KEYS[2] pre
-- ARGV[1] ticket id
-- Returns 1 when an entry was given up, 2 when the draw had moved it to the queue's line
-- (the caller leaves there; the row here is dropped), 0 when the shard has no row for it.
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
if string.sub(cur, 1, 2) == 'q:' then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 1
end
return 2
