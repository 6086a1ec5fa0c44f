-- lease.lua: take or keep the admission lease of one queue.
-- KEYS[1] lease  STRING owner of the lease, with a PX expiry
-- KEYS[2] fence  STRING fencing counter, incremented on every new holder
-- KEYS[3] clock  HASH   admission state; field idle = "1" while the queue rests (admit.lua)
-- ARGV[1] owner id (instance + loop nonce)
-- ARGV[2] lease time in ms
-- ARGV[3] "1" release; "2" take or keep unless the queue rests; "0" take or keep even if it
--         rests (the rest ends: tests and tools that tick by hand)
-- Returns the fencing token (> 0) while ARGV[1] holds the lease, 0 when another holds it,
-- -2 when the queue rests and nobody holds it ("2" only: the caller rests too).
-- A resting queue (nobody waiting, no pre-queue, no live token) has no leader: the last one
-- released the lease in the same step that set idle, and a join that ends the rest clears it.
if ARGV[3] == '1' then
  if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
  return 0
end
if ARGV[3] == '2' and redis.call('HGET', KEYS[3], 'idle') == '1' then
  return -2
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if ARGV[3] == '0' then redis.call('HDEL', KEYS[3], 'idle') end
  return redis.call('INCR', KEYS[2])
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return tonumber(redis.call('GET', KEYS[2]) or '0')
end
return 0
