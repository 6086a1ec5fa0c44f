-- limit.lua: a chain of token buckets checked in order in one atomic step.
-- KEYS[i]      HASH  bucket i: tokens (number, may be fractional), ts (µs of its last charge)
--                    All keys of one call share the hash tag {rl} (one Redis Cluster slot).
-- ARGV[1]      cost: tokens one request takes from every bucket (1)
-- ARGV[2i]     rate of bucket i: tokens added per second (> 0)
-- ARGV[2i+1]   burst of bucket i: capacity, and the tokens of a bucket never seen (>= cost)
-- Returns {allowed, index, remaining, retry_after_ms}
--   allowed = 1: every bucket held `cost` tokens and every bucket was charged; index = 0;
--                remaining = the fewest whole tokens left in any bucket.
--   allowed = 0: bucket `index` (1-based) is the FIRST in order that lacks `cost` tokens;
--                NO bucket was charged, so a request refused by an earlier (per-user)
--                bucket never spends a later (global) one; remaining = that bucket's whole
--                tokens; retry_after_ms = when it will hold `cost` tokens (rounded up).
-- Time is Redis TIME (one clock for every instance). A bucket expires once it would be
-- full again, which is the same as a bucket never seen.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cost = tonumber(ARGV[1])
local n = #KEYS
local level = {}
for i = 1, n do
  local rate = tonumber(ARGV[2 * i])
  local burst = tonumber(ARGV[2 * i + 1])
  local st = redis.call('HMGET', KEYS[i], 'tokens', 'ts')
  local tokens = tonumber(st[1])
  local ts = tonumber(st[2])
  if tokens == nil or ts == nil then
    tokens = burst
  else
    local elapsed = now - ts
    if elapsed < 0 then elapsed = 0 end
    tokens = math.min(burst, tokens + elapsed * rate / 1000000)
  end
  if tokens < cost then
    local wait_ms = math.ceil((cost - tokens) * 1000 / rate)
    if wait_ms < 1 then wait_ms = 1 end
    return {0, i, math.floor(tokens), wait_ms}
  end
  level[i] = tokens
end
local remaining = -1
for i = 1, n do
  local rate = tonumber(ARGV[2 * i])
  local burst = tonumber(ARGV[2 * i + 1])
  local left = level[i] - cost
  -- %.17g keeps every digit (tostring would round µs timestamps to 14 digits).
  redis.call('HSET', KEYS[i], 'tokens', string.format('%.17g', left), 'ts', string.format('%.17g', now))
  redis.call('PEXPIRE', KEYS[i], math.ceil((burst - left) * 1000 / rate) + 1000)
  if remaining < 0 or left < remaining then remaining = left end
end
return {1, 0, math.floor(remaining), 0}
