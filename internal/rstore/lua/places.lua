-- places.lua: a prelude, not a script. Go puts this text before join.lua and pjoin.lua (the
-- queue's own slot and a shard of a sharded pre-queue), so the per-address cap is one rule.
--
-- address_cap is the number of live places one client address may hold: places_per_ip
-- (default 100; 0 = no cap) and, where max_active is set, its share of it
-- (max(1, floor(max_active × share))). Arguments: the settings' stored strings (or nil).
local function address_cap(per_ip, max_active, share)
  local cap = tonumber(per_ip or '100') or 100
  local ma = tonumber(max_active or '0') or 0
  local s = tonumber(share or '0.1') or 0.1
  if cap > 0 and ma > 0 and s > 0 then
    cap = math.min(cap, math.max(1, math.floor(ma * s + 1e-9)))
  end
  return cap
end

-- address_full reports whether the address's place set (ZSET ticket -> sequence) holds cap
-- live places. A place counts from its join until its ticket's row (in the HASH tickets) says
-- it ended: it left, was abandoned, dropped or retired (no row), its token was used (u) or has
-- expired (a past its expiry, or e); an invite place (a lane's row) never counts. The set is
-- only checked when it is full: its oldest members (at most 1,000) are read in one HMGET and
-- the ended ones dropped, so a join costs at most ZCARD, ZRANGE and one HMGET.
local function address_full(places, tickets, cap, now)
  local n = redis.call('ZCARD', places)
  if n < cap then return false end
  local m = redis.call('ZRANGE', places, 0, 999)
  local rows = redis.call('HMGET', tickets, unpack(m))
  local ended = {}
  for i, tk in ipairs(m) do
    local row = rows[i]
    local live = false
    if row and not string.match(row, ':[pb]$') then
      local c = string.sub(row, 1, 1)
      if c == 'w' or c == 'q' then
        live = true
      elseif c == 'a' then
        live = (tonumber(string.match(row, '^a:%d+:[^:]*:(%d+)') or '0') or 0) > now
      end
    end
    if not live then ended[#ended + 1] = tk end
  end
  if #ended > 0 then redis.call('ZREM', places, unpack(ended)) end
  return n - #ended >= cap
end
