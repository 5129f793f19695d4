-- window_clock.lua: the window clock of draw_advance.lua and queue_advance.lua,
-- written once. It is no script of its own: the gate puts this text, after
-- window_time.lua (TICK_SLACK_MS, window_time), before each of those two when
-- it loads them (gate/src/gate.rs), so it reads no KEYS or ARGV and only
-- defines local functions; each script's contract and arity check stay at the
-- top of its own file and run first.
--
-- A window (a draw's purchase window, a waiting room's entry token) holds its
-- length of time during which an order could be placed. Window ends are kept
-- on a clock that stands still while ordering is impossible: window time =
-- Redis time - lost_ms, and, during a stall, the stall's start (stalled_ms) -
-- lost_ms. A stall is
--   "paused"    the sale is paused;
--   "backlog"   the outbox is full (the log is down): admit.lua refuses orders;
--   "outage"    no call came for longer than TICK_SLACK_MS: every ingress calls
--               every 100 ms, so none could reach Redis (or none ran), nor
--               could a buyer. Counted whole, from the last call (alive_ms),
--               the last moment Redis is known to have answered;
--   "granting"  (draws only) the winners are more than one call's worth.
-- A stall starts only while a window is open, and when it ends the call logs
-- it (WindowsExtended: from, until, reason): every window open at its start
-- ends that much later, which `seckill draw verify` and the queue audit
-- recompute.
--
-- Why a gap counts only past TICK_SLACK_MS: calls come every 100 ms from each
-- ingress, later when a machine is busy, so a gap up to TICK_SLACK_MS is taken
-- for the scheduling of ticks and extends nothing. The bound that leaves: an
-- outage shorter than TICK_SLACK_MS is not counted, so a window loses to each
-- such outage its length, under TICK_SLACK_MS (a Redis that fails again and
-- again for just under it would eat most of a window); a longer outage costs
-- a window nothing, and gives it at most the time from the last call to the
-- outage's start (one tick when the ingresses tick on time).

-- Unix milliseconds as RFC 3339 (days to civil date: H. Hinnant's algorithm).
local function rfc3339(ms)
  local seconds = math.floor(ms / 1000)
  local days = math.floor(seconds / 86400)
  local of_day = seconds - days * 86400
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local day = doy - math.floor((153 * mp + 2) / 5) + 1
  local month = mp < 10 and mp + 3 or mp - 9
  local year = yoe + era * 400 + (month <= 2 and 1 or 0)
  return string.format("%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", year, month, day, math.floor(of_day / 3600),
    math.floor(of_day % 3600 / 60), of_day % 60, ms % 1000)
end

-- The clock as the room hash keeps it. voucher_key, room_key, holds_key: the
-- calling script's voucher hash, room hash and holds zset (window end on this
-- clock per open window), each from its KEYS; saved: the room's lost_ms,
-- stalled_ms, stall_reason and alive_ms as read (HMGET); now_ms: Redis time;
-- emit(kind, fields): the script's outbox writer. A gap since the last call
-- (alive_ms) longer than TICK_SLACK_MS is taken up here as an outage.
local function window_clock(voucher_key, room_key, holds_key, saved, now_ms, emit)
  local clock = {
    lost = tonumber(saved[1] or "0") or 0,
    stalled = tonumber(saved[2] or ""),
    reason = saved[3],
  }
  local was_stalled = saved[2] ~= nil or saved[3] ~= nil
  local alive = tonumber(saved[4] or "")
  -- Window time now.
  function clock.now()
    return (clock.stalled or now_ms) - clock.lost
  end
  -- Whether a window was open at `ms` (Redis time, before any stall since).
  local function open_at(ms)
    return redis.call("ZCOUNT", holds_key, "(" .. string.format("%d", ms - clock.lost), "+inf") > 0
  end
  if not clock.stalled and alive and now_ms - alive > TICK_SLACK_MS then
    -- admit.lua marks the voucher hash (stalled_ms) when it let an order
    -- spend a window on this outage's time before any call logged it: that
    -- window is no longer open, and the outage must be logged all the same.
    local judged = redis.call("HEXISTS", voucher_key, "stalled_ms") == 1
    if judged or open_at(alive) then
      clock.stalled, clock.reason = alive, "outage"
    end
    was_stalled = was_stalled or judged
  end
  -- Starts a stall for `reason` unless one runs; only while a window is open.
  function clock.stall(reason)
    if not clock.stalled and open_at(now_ms) then
      clock.stalled, clock.reason = now_ms, reason
    end
  end
  -- Ends the stall, if any, and logs it.
  function clock.unstall()
    if clock.stalled then
      emit("WindowsExtended", string.format(',"from":"%s","until":"%s","reason":"%s"', rfc3339(clock.stalled),
        rfc3339(now_ms), clock.reason))
      clock.lost = clock.lost + now_ms - clock.stalled
      clock.stalled, clock.reason = nil, nil
    end
  end
  -- Keeps the clock in the room and, for admit.lua, in the voucher hash
  -- (alive_ms there too: admit.lua counts an outage before the next call
  -- logs it, window_time.lua).
  function clock.keep()
    redis.call("HSET", room_key, "lost_ms", clock.lost, "alive_ms", now_ms)
    redis.call("HSET", voucher_key, "lost_ms", clock.lost, "alive_ms", now_ms)
    if clock.stalled then
      redis.call("HSET", room_key, "stalled_ms", clock.stalled, "stall_reason", clock.reason)
      redis.call("HSET", voucher_key, "stalled_ms", clock.stalled)
    elseif was_stalled then
      redis.call("HDEL", room_key, "stalled_ms", "stall_reason")
      redis.call("HDEL", voucher_key, "stalled_ms")
    end
  end
  return clock
end
