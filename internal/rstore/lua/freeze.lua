-- freeze.lua: a prelude, not a script. Go puts this text before join.lua and before
-- admit.lua when it makes their scripts (script.go), so the draw's start is written once;
-- every key it touches is one of the including script's KEYS, passed in by name.
--
-- The draw phases of a scheduled queue (cfg field draw; Go: DrawPhase in settings.go).
local PHASE_SCHEDULED = 's' -- before the start: joiners enter the pre-queue
local PHASE_FROZEN = 'f'    -- started: the participant list is frozen, places being drawn
local PHASE_DRAWN = 'd'     -- every participant has its place

-- freeze starts the draw: the pre-queue becomes the frozen participant list, and the next
-- n sequences of the normal line are reserved for its members (the draw gives each one of
-- them), so whoever joins from now on queues FIFO behind them. join.lua and admit.lua both
-- call it at the start, whichever runs first; the caller's phase is PHASE_FROZEN after it.
--   cfg HASH settings (draw := 'f')   seq STRING the normal line's last sequence
--   pre ZSET the pre-queue            drawset ZSET the frozen list (pre renamed)
--   draw HASH the draw's record (base, n, frozen_ms)   now Redis time, ms
--   extra  nil from join.lua and admit.lua; from freezeall.lua, the members the other
--          shards of a sharded pre-queue froze (their number is reserved too)
-- It returns false, freezing nothing, when the pre-queue is sharded (cfg pq_tags) and the
-- caller is not freezeall.lua: the other shards' members are counted first (the leader or
-- a joiner runs queue/prequeue.go's freeze, which ends in freezeall.lua).
local function freeze(cfg, seq, pre, drawset, draw, now, extra)
  if extra == nil then
    local tags = redis.call('HGET', cfg, 'pq_tags')
    if tags and tags ~= '' then return false end
    extra = 0
  end
  local n = 0
  if redis.call('EXISTS', pre) == 1 then
    n = redis.call('ZCARD', pre)
    redis.call('RENAME', pre, drawset)
  end
  local own = n
  n = n + extra
  local base = tonumber(redis.call('GET', seq) or '0') or 0
  if n > 0 then redis.call('INCRBY', seq, n) end
  redis.call('HSET', draw, 'base', base, 'n', n, 'n0', own, 'frozen_ms', now)
  redis.call('HSET', cfg, 'draw', PHASE_FROZEN)
  return true
end
