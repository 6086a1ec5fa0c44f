-- token.lua: check, claim, consume or release an admission token.
-- KEYS[1] token    STRING ticket id the token was issued to (PX = token TTL)
-- KEYS[2] tickets  HASH   ticket -> "state:seq:token:exp_ms:extra"
-- KEYS[3] claim    STRING the request currently using the token (PX)
-- KEYS[4] active   ZSET   admitted ticket -> token expiry (max_active)
-- ARGV[1] op: "claim" | "consume" | "release" | "check"
-- ARGV[2] ticket id of the caller
-- ARGV[3] token
-- ARGV[4] request key (Idempotency-Key, or a random id when the request has none)
-- ARGV[5] claim TTL ms
-- ARGV[6] "1" when ARGV[4] is a client Idempotency-Key (may be shared by repeats)
-- Returns {verdict, exp_ms}, and {"live", exp_ms, tick} for a claim that takes the token
-- (tick: the admitting tick from the ticket's state, 0 when it records none): live, shared (same idempotency key already in flight),
-- busy (another request holds it), replay (consumed by this idempotency key),
-- used, expired, unknown, not_yours; consume/release return {"ok"} or {"gone"}.
local op, ticket, token = ARGV[1], ARGV[2], ARGV[3]
local function split(s)
  local out = {}
  for part in string.gmatch(s .. ':', '([^:]*):') do out[#out + 1] = part end
  return out
end
local owner = redis.call('GET', KEYS[1])
if op == 'release' then
  if redis.call('GET', KEYS[3]) == ARGV[4] then redis.call('DEL', KEYS[3]) end
  return {'ok'}
end
if op == 'consume' then
  if owner ~= ticket then return {'gone'} end
  local cur = redis.call('HGET', KEYS[2], ticket)
  local f = split(cur or 'a:0:' .. token .. ':0')
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[4], ticket)
  redis.call('HSET', KEYS[2], ticket, 'u:' .. f[2] .. ':' .. token .. ':' .. (f[4] or '0') .. ':' .. ARGV[4])
  redis.call('DEL', KEYS[3])
  return {'ok'}
end
if not owner then
  local cur = redis.call('HGET', KEYS[2], ticket)
  if cur then
    local f = split(cur)
    if f[3] == token then
      if f[1] == 'u' then
        if ARGV[6] == '1' and f[5] == ARGV[4] then return {'replay', 0} end
        return {'used', 0}
      end
      if f[1] == 'a' or f[1] == 'e' then return {'expired', 0} end
    end
  end
  return {'unknown', 0}
end
if owner ~= ticket then return {'not_yours', 0} end
local exp, tick = 0, 0
local cur = redis.call('HGET', KEYS[2], ticket)
if cur then
  local f = split(cur)
  exp = tonumber(f[4]) or 0
  if f[1] == 'a' then tick = tonumber(f[5]) or 0 end
end
if op == 'check' then return {'live', exp} end
local holder = redis.call('GET', KEYS[3])
if holder then
  if ARGV[6] == '1' and holder == ARGV[4] then return {'shared', exp} end
  return {'busy', exp}
end
redis.call('SET', KEYS[3], ARGV[4], 'PX', ARGV[5])
return {'live', exp, tick}
