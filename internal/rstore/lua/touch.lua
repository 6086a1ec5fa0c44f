-- touch.lua: a sign of life for tickets with an open stream, scored with Redis TIME (the
-- clock admit.lua's abandonment sweep compares with).
-- KEYS[1] seen  ZSET ticket -> last sign of life (ms)
-- ARGV[1…] ticket ids (at most ~1,000 per call)
-- XX: only tickets still present are refreshed, so an admitted or departed one is not
-- brought back. GT: a later sign of life only moves a score forward, so the hold that an
-- e-mail registration sets in the future (mailjoin.lua) is not cut short by an open stream.
-- Returns the number of tickets refreshed.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local args = {}
for i = 1, #ARGV do
  args[#args + 1] = now
  args[#args + 1] = ARGV[i]
end
if #args == 0 then return 0 end
return redis.call('ZADD', KEYS[1], 'XX', 'GT', 'CH', unpack(args))
