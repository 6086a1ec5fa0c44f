-- mailforget.lua: a place's e-mail registration is dropped (the place left, or its last
-- message went out).
-- KEYS[1] mailq  KEYS[2] mailnear  (ZSET, see mailjoin.lua)  KEYS[3…] mail STRING, one per ticket
-- ARGV[1…] the ticket ids, in the order of KEYS[3…]
-- Answers the number of registrations deleted.
local n = 0
for i = 1, #ARGV do
  redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('ZREM', KEYS[2], ARGV[i])
  n = n + redis.call('DEL', KEYS[2 + i])
end
return n
