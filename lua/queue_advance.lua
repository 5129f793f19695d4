-- queue_advance.lua: moves a waiting room on. Any ingress may call it at any
-- time, as often as it likes: the rate bound is kept here, by the Redis
-- clock, so several callers share it rather than multiply it.
--
-- KEYS[1]  voucher hash <prefix>:{v:<id>}:voucher  fields read: remaining, begins_ms, ends_ms, paused;
--                                                  written: lost_ms, stalled_ms (the room's, for admit.lua)
-- KEYS[2]  room hash    <prefix>:{v:<id>}:room     (queue_open.lua)
-- KEYS[3]  line zset    <prefix>:{v:<id>}:line     (queue_join.lua)
-- KEYS[4]  places hash  <prefix>:{v:<id>}:places   (queue_join.lua)
-- KEYS[5]  seen hash    <prefix>:{v:<id>}:seen     (queue_join.lua, queue_seen.lua)
-- KEYS[6]  holds zset   <prefix>:{v:<id>}:holds    entry number -> token expiry (ms, on the window clock):
--                                                  issued tokens not yet used (admit.lua removes a
--                                                  used one)
-- KEYS[7]  outbox stream (admit.lua's KEYS[6])
-- ARGV[1]  a fresh UUID: the records written get it with the last four hex digits replaced by a count
-- ARGV[2]  voucher id: the records' voucher and Kafka key
-- ARGV[3]  outbox bound: at this many entries nothing is served
-- ARGV[4]  most places passed in one call (served or skipped): bounds the call's time
-- ARGV[5]  the event schema version the records are written in
--
-- At the first call at or after the sale's start the seed is revealed
-- (QueueSeedRevealed). A room whose shuffle waits for a beacon round
-- (beacon_round, from queue_open.lua) first waits for it: from the start
-- ("closed": the pre-queue is closed) until draw_beacon.lua puts the round's
-- randomness in seed (beacon_wait "0"), it answers "awaiting_beacon"; then
-- it hashes the pre-queue (placed at -1 by queue_join.lua, walked in member
-- order: core's queue.rs, beacon step 1; pre_hashed, pre_chain) and keys
-- it (step 2), ARGV[4] places per call, answering "ranking", and reveals the
-- round with the hash (reveal_extra, entries_hash). Then, places are served in rank order while
--     entries open < ceil(remaining x factor_percent / 100)
-- and the rate allows (entry_rate per second, at most one second saved up):
-- a place whose holder has not been seen for idle_ms is skipped
-- (QueuePlaceExpired); any other gets an entry (QueueEntryIssued) whose
-- token admits one order until now + token_ms. Entries lapse unused when
-- their time passes, which frees their share for the next places. Nothing is
-- served while the sale is paused or over, or while the outbox is full.
--
-- The window clock (lua/window_clock.lua, which the gate puts before this
-- script; rfc3339 and window_clock below are its functions): a token admits an order for token_ms of time during which one
-- could be placed; its expiry stands still while nobody can order ("paused",
-- "backlog", "outage"), and each stall is logged when it ends
-- (WindowsExtended), which the queue audit recomputes. The served tokens'
-- records carry Redis time (now + token_ms), as issued.
--
-- Returns {state, cursor, places, issued, open, remaining, pre_queued, served_now, skipped_now, now_ms, ""},
-- all strings (the last is draw_advance.lua's winners, none here); state is one of:
--   "unknown"      no such voucher or room: nothing changed
--   "uncommitted"  the seed's hash is not in the log yet: no joins, nothing served
--   "before"       the sale has not begun
--   "awaiting_beacon", "ranking"  (a beacon's room, above) nothing served; ranking's served_now is
--                  the places hashed or keyed by the call
--   "open"         serving (or waiting for a share or the rate)
--   "sold_out"     nothing remains; waiting places keep their rank for units coming back
--   "paused", "ended", "backlog"
-- cursor: places passed; places: places ever taken; issued: entries ever issued;
-- open: entries open now; pre_queued: places taken before the start ("" before it).
if #KEYS ~= 7 or #ARGV ~= 5 then
  return redis.error_reply("queue_advance.lua: expects 7 KEYS and 5 ARGV")
end
local voucher = redis.call("HMGET", KEYS[1], "remaining", "begins_ms", "ends_ms", "paused")
local room = redis.call("HMGET", KEYS[2], "seed", "committed", "revealed", "cursor", "issued", "factor_percent",
  "entry_rate", "idle_ms", "token_ms", "rate_ms", "expired", "lost_ms", "stalled_ms", "stall_reason", "alive_ms")
local time = redis.call("TIME")
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if not voucher[1] or not room[1] then
  return {"unknown", "0", "0", "0", "0", "0", "", "0", "0", tostring(now_ms), ""}
end
local places = redis.call("ZCARD", KEYS[3])
local cursor = tonumber(room[4])
local issued = tonumber(room[5])
local remaining = tonumber(voucher[1])
local function summary(state, pre_queued, served, skipped, open)
  return {state, tostring(cursor), tostring(places), tostring(issued), tostring(open), tostring(remaining),
    pre_queued, tostring(served), tostring(skipped), tostring(now_ms), ""}
end
if room[2] ~= "1" then
  return summary("uncommitted", "", 0, 0, 0)
end
if now_ms < tonumber(voucher[2]) then
  return summary("before", "", 0, 0, 0)
end

local written = 0
local stamp = rfc3339(now_ms)
local function emit(kind, fields)
  written = written + 1
  local id = string.sub(ARGV[1], 1, 32) .. string.format("%04x", written)
  local record = string.format('{"schema":%s,"event_id":"%s","emitted_at":"%s","type":"%s","voucher_id":"%s"%s}',
    ARGV[5], id, stamp, kind, ARGV[2], fields)
  redis.call("XADD", KEYS[7], "*", "key", ARGV[2], "record", record)
end

-- The window clock (lua/window_clock.lua), as the room keeps it.
local clock = window_clock(KEYS[1], KEYS[2], KEYS[6], {room[12], room[13], room[14], room[15]}, now_ms, emit)

local backlog = redis.call("XLEN", KEYS[7])
if backlog >= tonumber(ARGV[3]) then
  clock.stall("backlog")
  clock.keep()
  return summary("backlog", tostring(redis.call("ZCOUNT", KEYS[3], 0, "(4503599627370496")), 0, 0,
    redis.call("ZCARD", KEYS[6]))
end
local beacon = redis.call("HMGET", KEYS[2], "beacon_round", "beacon_wait", "pre_hashed", "pre_chain", "reveal_extra")
if beacon[1] and room[3] ~= "1" then
  if beacon[2] == "1" then
    redis.call("HSET", KEYS[2], "closed", "1")
    return summary("awaiting_beacon", "", 0, 0, 0)
  end
  local most = tonumber(ARGV[4])
  local pre = redis.call("ZCOUNT", KEYS[3], -1, -1)
  local hashed, chain = tonumber(beacon[3] or "0") or 0, beacon[4] or ""
  local batch = {}
  if hashed < pre then
    batch = redis.call("ZRANGEBYSCORE", KEYS[3], -1, -1, "LIMIT", hashed, most)
    for _, member in ipairs(batch) do
      chain = redis.sha1hex(chain .. ":" .. string.match(member, "^(.*)|%d+$"))
    end
    redis.call("HSET", KEYS[2], "pre_hashed", hashed + #batch, "pre_chain", chain)
  elseif pre > 0 then
    batch = redis.call("ZRANGEBYSCORE", KEYS[3], -1, -1, "LIMIT", 0, most)
    local prefix = room[1] .. ":" .. chain .. ":"
    for _, member in ipairs(batch) do
      local key = tonumber(string.sub(redis.sha1hex(prefix .. string.match(member, "^(.*)|%d+$")), 1, 13), 16)
      redis.call("ZADD", KEYS[3], string.format("%d", key), member)
    end
  end
  if #batch > 0 then
    return summary("ranking", "", #batch, 0, 0)
  end
end
local pre_queued = redis.call("ZCOUNT", KEYS[3], 0, "(4503599627370496")
if room[3] ~= "1" then
  redis.call("HSET", KEYS[2], "revealed", "1")
  local extra = ""
  if beacon[1] then
    extra = string.format('%s,"entries_hash":"%s"', beacon[5] or "", beacon[4] or "")
  end
  emit("QueueSeedRevealed", string.format(',"seed":"%s","pre_queued":%d%s', room[1], pre_queued, extra))
end

local state = "open"
if voucher[4] == "1" then
  state = "paused"
  clock.stall("paused")
elseif now_ms >= tonumber(voucher[3]) then
  state = "ended"
else
  clock.unstall()
  if remaining <= 0 then
    state = "sold_out"
  end
end
clock.keep()
-- Tokens past their time no longer hold a share.
redis.call("ZREMRANGEBYSCORE", KEYS[6], "-inf", clock.now())
local open = redis.call("ZCARD", KEYS[6])
if state ~= "open" then
  return summary(state, tostring(pre_queued), 0, 0, open)
end

local factor, rate = tonumber(room[6]), tonumber(room[7])
local idle_ms, token_ms = tonumber(room[8]), tonumber(room[9])
local share = math.ceil(remaining * factor / 100) - open
local rate_clock = math.max(tonumber(room[10] or "0") or 0, now_ms - 1000)
local allowance = math.floor((now_ms - rate_clock) * rate / 1000)
local wanted = math.min(share, allowance)
local most = tonumber(ARGV[4])
local served, skipped = 0, 0
while served < wanted and served + skipped < most and cursor < places do
  local last = cursor + math.min(wanted - served, most - served - skipped) - 1
  local batch = redis.call("ZRANGE", KEYS[3], cursor, last)
  if #batch == 0 then
    break
  end
  for _, member in ipairs(batch) do
    cursor = cursor + 1
    local user, attempt = string.match(member, "^(.*)|(%d+)$")
    local place = redis.call("HGET", KEYS[4], user) or ""
    local held, state_now = string.match(place, "^(%d+)|(%a)")
    -- Every place at or past the cursor is waiting (only this script moves
    -- one out of waiting, as the cursor passes it); checked all the same.
    if held == attempt and state_now == "w" then
      local seen = tonumber(redis.call("HGET", KEYS[5], user) or "0")
      if seen + idle_ms < now_ms then
        redis.call("HSET", KEYS[4], user, attempt .. "|x||")
        emit("QueuePlaceExpired", string.format(',"user_id":"%s","place":%d', user, cursor))
        skipped = skipped + 1
      else
        issued = issued + 1
        local expires = clock.now() + token_ms
        redis.call("HSET", KEYS[4], user, string.format("%s|s|%d|%d", attempt, issued, expires))
        redis.call("ZADD", KEYS[6], expires, tostring(issued))
        emit("QueueEntryIssued", string.format(',"user_id":"%s","place":%d,"entry":%d,"expires_at":"%s"',
          user, cursor, issued, rfc3339(now_ms + token_ms)))
        served = served + 1
      end
    end
    if served >= wanted or served + skipped >= most then
      break
    end
  end
end
if served > 0 or skipped > 0 then
  local expired = tonumber(room[11] or "0") + skipped
  redis.call("HSET", KEYS[2], "cursor", cursor, "issued", issued, "expired", expired,
    "rate_ms", string.format("%.3f", rate_clock + served * 1000 / rate))
  local expires = redis.call("PEXPIRETIME", KEYS[2])
  if expires > 0 then
    redis.call("PEXPIREAT", KEYS[6], expires)
  end
end
return summary("open", tostring(pre_queued), served, skipped, open + served)
