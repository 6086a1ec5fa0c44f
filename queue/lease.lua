-- lease.lua: take or keep the admission lease of one queue.
-- KEYS[1] lease  STRING owner of the lease, with a PX expiry
-- KEYS[2] fence  STRING fencing counter, incremented on every new holder
-- ARGV[1] owner id (instance + loop nonce)
-- ARGV[2] lease time in ms
-- ARGV[3] "1" to release instead of take
-- Returns the fencing token (> 0) while ARGV[1] holds the lease, 0 otherwise.
if ARGV[3] == '1' then
  if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
  return 0
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return tonumber(redis.call('GET', KEYS[2]) or '0')
end
return 0
