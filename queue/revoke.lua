-- revoke.lua: revoke one live admission token (its jti) of a queue.
-- KEYS[1] token    STRING ticket id the token was issued to (PX = the token's remaining life)
-- KEYS[2] revoked  STRING the revocation mark of that token (PX = its remaining life + ARGV[2])
-- ARGV[1] the ticket id the token must belong to ("" for any ticket)
-- ARGV[2] extra life of the mark past the token's, ms
-- ARGV[3] life of the mark when the token key has no TTL, ms
-- Returns {"revoked", ticket id, mark TTL ms, 1 when the mark existed already else 0}, or
-- {"unknown"} when the token is not live
-- in this queue (never issued, used, lapsed) or belongs to another ticket than ARGV[1].
-- The token itself is left as it is: every guard refuses it by the mark, and its place
-- in max_active ends when it would have lapsed.
local owner = redis.call('GET', KEYS[1])
if not owner or (ARGV[1] ~= '' and owner ~= ARGV[1]) then return {'unknown'} end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then ttl = tonumber(ARGV[3]) else ttl = ttl + tonumber(ARGV[2]) end
local again = redis.call('EXISTS', KEYS[2])
redis.call('SET', KEYS[2], owner, 'PX', ttl)
return {'revoked', owner, ttl, again}
