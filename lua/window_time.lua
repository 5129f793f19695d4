-- window_time.lua: reading the window clock, written once. Like
-- window_clock.lua it is no script of its own: the gate puts this text before
-- admit.lua, queue_join.lua, queue_status.lua, draw_status.lua and
-- window_clock.lua (gate/src/gate.rs), so it reads no KEYS or ARGV and only
-- defines locals; each script's contract and arity check stay at the top of
-- its own file and run first.
--
-- Window time = Redis time - lost_ms, frozen at stalled_ms - lost_ms during a
-- stall (window_clock.lua keeps the three fields). A gap since the last
-- advance call (alive_ms) longer than TICK_SLACK_MS is an outage that the
-- next advance call logs as a stall from alive_ms. Every reader counts it
-- already, so the first order to reach Redis after an outage, which may come
-- before any advance call, is judged on the clock the log will show (a
-- window open at alive_ms is one the stall extends; one over by then is over
-- either way).

-- Ten ticks of one ingress (every ingress calls every 100 ms).
local TICK_SLACK_MS = 1000

-- lost, stalled, alive: a hash's lost_ms, stalled_ms and alive_ms as read by
-- HMGET (strings, or false when absent); now_ms: Redis time. Returns window
-- time now, and the stall's start (Redis time) if one runs, else nil.
local function window_time(lost, stalled, alive, now_ms)
  local stalled_ms = tonumber(stalled or "")
  local alive_ms = tonumber(alive or "")
  if not stalled_ms and alive_ms and now_ms - alive_ms > TICK_SLACK_MS then
    stalled_ms = alive_ms
  end
  return (stalled_ms or now_ms) - (tonumber(lost or "0") or 0), stalled_ms
end

-- A place as a status read shows it: a served place's window end
-- ("<attempt>|s|<entry or rank>|<end>", on the window clock) in Redis time,
-- as it stands now; any other place as it is.
local function shown_in_redis_time(place, lost, stalled, alive, now_ms)
  local head, ends = string.match(place, "^(%d+|s|%d*|)(%d+)$")
  if not head then
    return place
  end
  return head .. string.format("%d", tonumber(ends) + now_ms - window_time(lost, stalled, alive, now_ms))
end
