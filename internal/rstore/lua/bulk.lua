-- bulk.lua: a prelude, not a script. Go puts this text before drawplace.lua and ptake.lua,
-- which handle a draw batch of thousands of members with a few variadic commands instead of
-- a few commands a member (each command called from Lua costs more than the work it does,
-- and every one is replicated on its own). Lua's unpack takes at most ~8,000 values, so the
-- values go in chunks of BULK_CHUNK (an even number: field/value and score/member pairs stay
-- whole).
local BULK_CHUNK = 4000

-- bulk_hmget returns the values of fields (a list) of the hash key, in order (false for
-- none).
local function bulk_hmget(key, fields)
  local out = {}
  for s = 1, #fields, BULK_CHUNK do
    local got = redis.call('HMGET', key, unpack(fields, s, math.min(s + BULK_CHUNK - 1, #fields)))
    for _, v in ipairs(got) do out[#out + 1] = v end
  end
  return out
end

-- bulk_call runs cmd on key with the values of vals, as few calls as the chunks allow
-- (none for no values).
local function bulk_call(cmd, key, vals)
  for s = 1, #vals, BULK_CHUNK do
    redis.call(cmd, key, unpack(vals, s, math.min(s + BULK_CHUNK - 1, #vals)))
  end
end
