-- invites_create.lua: store new invite codes (the value format is also read by join.lua:
-- "lane:uses_left:expires_ms:max_uses:created_ms").
-- KEYS[1] cfg HASH (missing = unknown queue)   KEYS[2] invites HASH   KEYS[3] invitexp ZSET
-- ARGV[1] lane letter   ARGV[2] uses   ARGV[3] expires_ms   ARGV[4…] codes
-- Returns the creation time (ms), -1 unknown queue, -2 expires_ms not in the future.
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = tonumber(ARGV[3])
if exp <= now then return -2 end
for _, code in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 10000)) do
  redis.call('HDEL', KEYS[2], code)
  redis.call('ZREM', KEYS[3], code)
end
local val = ARGV[1] .. ':' .. ARGV[2] .. ':' .. ARGV[3] .. ':' .. ARGV[2] .. ':' .. now
local h, z = {}, {}
local function flush()
  if #h > 0 then
    redis.call('HSET', KEYS[2], unpack(h))
    redis.call('ZADD', KEYS[3], unpack(z))
    h, z = {}, {}
  end
end
for i = 4, #ARGV do
  h[#h + 1] = ARGV[i]
  h[#h + 1] = val
  z[#z + 1] = exp
  z[#z + 1] = ARGV[i]
  if #h >= 1000 then flush() end
end
flush()
-- Both keys live as long as their last code.
for _, key in ipairs({KEYS[2], KEYS[3]}) do
  local pt = redis.call('PTTL', key)
  if pt < 0 or now + pt < exp then redis.call('PEXPIREAT', key, exp) end
end
return now
