-- revoke.lua: revoke one live admission token (its jti) of a queue.
-- KEYS[1] token    STRING ticket id the token was issued to (PX = the token's remaining life)
-- KEYS[2] revoked  STRING the revocation mark of that token (PX = its remaining life + ARGV[2])
-- KEYS[3] tickets  HASH   ticket -> "state:seq[:token:exp_ms:…]" (state.go)
-- KEYS[4] active   ZSET   admitted ticket -> token expiry (max_active)
-- ARGV[1] the ticket id the token must belong to ("" for any ticket)
-- ARGV[2] extra life of the mark past the token's, ms
-- ARGV[3] life of the mark when the token key has no TTL, ms
-- ARGV[4] the token (the row is ended only while it still holds this token)
-- Returns {"revoked", ticket id, mark TTL ms, 1 when the mark existed already else 0}, or
-- {"unknown"} when the token is not live
-- in this queue (never issued, used, lapsed) or belongs to another ticket than ARGV[1].
-- The token key is left as it is, so every guard finds the token and refuses it by the mark
-- (token_revoked, not token_invalid). The admission itself ends here, as if the token had
-- lapsed: the ticket's row becomes "e…" (expired unused: the buyer may join again and gets a
-- new place) and its max_active slot is free for the next admission at once.
local owner = redis.call('GET', KEYS[1])
if not owner or (ARGV[1] ~= '' and owner ~= ARGV[1]) then return {'unknown'} end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then ttl = tonumber(ARGV[3]) else ttl = ttl + tonumber(ARGV[2]) end
local again = redis.call('EXISTS', KEYS[2])
redis.call('SET', KEYS[2], owner, 'PX', ttl)
local cur = redis.call('HGET', KEYS[3], owner)
if cur and string.sub(cur, 1, 2) == 'a:' then
  local f3 = string.match(cur, '^a:[^:]*:([^:]*)')
  if f3 == ARGV[4] then
    redis.call('HSET', KEYS[3], owner, 'e' .. string.sub(cur, 2))
    redis.call('ZREM', KEYS[4], owner)
  end
end
return {'revoked', owner, ttl, again}
