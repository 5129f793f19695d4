-- draw_advance.lua: moves a draw on. Any ingress may call it at any time, as
-- often as it likes: every step is kept in the room hash, so several
-- callers share the work rather than repeat it, and none does more than
-- ARGV[4] users' worth per call (the caller calls again while a call used
-- all of it).
--
-- KEYS[1]  voucher hash <prefix>:{v:<id>}:voucher  fields read: remaining, ends_ms, paused, limit;
--                                                  written: lost_ms, stalled_ms (the room's, for admit.lua)
-- KEYS[2]  room hash    <prefix>:{v:<id>}:room     (queue_open.lua "open_draw")
-- KEYS[3]  line zset    <prefix>:{v:<id>}:line     user -> seq (draw_enter.lua)
-- KEYS[4]  places hash  <prefix>:{v:<id>}:places   (draw_enter.lua)
-- KEYS[5]  ranks zset   <prefix>:{v:<id>}:ranks    user -> key (core's draw.rs step 2): the ranking
-- KEYS[6]  holds zset   <prefix>:{v:<id>}:holds    rank -> window end (ms, on the window clock below):
--                                                  wins open (admit.lua removes a used one)
-- KEYS[7]  outbox stream (admit.lua's KEYS[6])
-- ARGV[1]  a fresh UUID: the records written get it with the last four hex digits replaced by a count
-- ARGV[2]  voucher id: the records' voucher and Kafka key
-- ARGV[3]  outbox bound: at this many entries nothing is written
-- ARGV[4]  most users keyed, ranked or passed in one call; also the users per DrawRanked record
-- ARGV[5]  the event schema version the records are written in
--
-- The phases (the room's "phase"), each taken up by whichever call comes:
--   entering    until draw_ms (the Redis clock). Then entries close and the
--               seed is revealed (DrawSeedRevealed, with the entry count and
--               the list's hash);
--   ranking     each entrant's key, in seq order, into the ranks zset;
--   publishing  the ranking, ARGV[4] users per DrawRanked record, each
--               user's place marked with its rank;
--   drawn       the wins. A win may buy up to the per-user limit, so each
--               open win stands for `limit` units. At the first call here
--               ranks 1..W win, W = min(ceil(units left / limit), entries),
--               all until now + purchase_ms (DrawWinnersSelected);
--               afterwards, while the open wins stand for fewer units than
--               are left, the next rank wins (DrawWinnerPromoted) until the
--               ranks run out. Nothing is won while the sale is paused or
--               over, or while the outbox is full.
--
-- The window clock. A window holds purchase_ms of time during which an
-- order could be placed. Window ends are kept on a clock that stands still
-- while ordering is impossible: window time = Redis time - lost_ms, and,
-- during a stall, the stall's start (stalled_ms) - lost_ms. A stall is
--   "paused"    the sale is paused;
--   "backlog"   the outbox is full (the log is down): admit.lua refuses orders;
--   "outage"    no call came for GAP_MS, 5 s: every ingress ticks every 100 ms, so
--               no ingress could reach Redis (or none ran), nor could a buyer;
--   "granting"  the winners are more than one call's worth (ARGV[4]): ranks
--               past the first call cannot order until a later call grants
--               them, so every winner's window waits for the last one.
-- A stall starts only while a window is open, and when it ends the call logs
-- it (WindowsExtended: from, until, reason): every window open at its start
-- ends that much later, which is what `seckill draw verify` recomputes.
--
-- Returns {state, cursor, entries, issued, open, remaining, "", worked, won, now_ms, selected}, all
-- strings (the shape of queue_advance.lua's answer); state is one of
-- "unknown", "uncommitted", "before" (entries not open yet), "entering", "awaiting_beacon" (entries
-- closed, the beacon round not in yet: lua/draw_beacon.lua), "ranking" (entries closed,
-- the ranking not all logged yet), "open", "sold_out", "paused", "ended", "backlog".
-- cursor: ranks passed (won); issued: the same; open: wins open now; worked: users keyed, ranked or
-- passed by this call; won: wins this call gave; selected: W ("" before it is fixed).
if #KEYS ~= 7 or #ARGV ~= 5 then
  return redis.error_reply("draw_advance.lua: expects 7 KEYS and 5 ARGV")
end
local voucher = redis.call("HMGET", KEYS[1], "remaining", "ends_ms", "paused", "limit")
local room = redis.call("HMGET", KEYS[2], "seed", "committed", "entries_ms", "draw_ms", "purchase_ms", "phase",
  "entries", "chain", "ranked", "published", "cursor", "selected", "selected_until", "lost_ms", "stalled_ms",
  "stall_reason", "alive_ms")
local clock = redis.call("TIME")
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
if not voucher[1] or not room[1] or not room[6] then
  return {"unknown", "0", "0", "0", "0", "0", "", "0", "0", tostring(now_ms), ""}
end
local phase = room[6]
local entries = tonumber(room[7])
local ranked, published, cursor = tonumber(room[9]), tonumber(room[10]), tonumber(room[11])
local selected = tonumber(room[12] or "")
local remaining = tonumber(voucher[1])
local per_win = math.max(tonumber(voucher[4] or "1") or 1, 1)
local worked, won, open = 0, 0, 0
local function summary(state)
  return {state, tostring(cursor), tostring(entries), tostring(cursor), tostring(open), tostring(remaining), "",
    tostring(worked), tostring(won), tostring(now_ms), selected and tostring(selected) or ""}
end
if room[2] ~= "1" then
  return summary("uncommitted")
end
if now_ms < tonumber(room[3]) then
  return summary("before")
end
if phase == "entering" and now_ms < tonumber(room[4]) then
  return summary("entering")
end
-- A beacon draw reveals the beacon round's randomness, put in seed by
-- draw_beacon.lua once the round is published: until then it waits.
local beacon = redis.call("HMGET", KEYS[2], "beacon_wait", "reveal_extra")
if phase == "entering" and beacon[1] == "1" then
  return summary("awaiting_beacon")
end
local backlog = redis.call("XLEN", KEYS[7]) >= tonumber(ARGV[3])
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
local written = 0
local stamp = rfc3339(now_ms)
local function emit(kind, fields)
  written = written + 1
  local id = string.sub(ARGV[1], 1, 32) .. string.format("%04x", written)
  local record = string.format('{"schema":%s,"event_id":"%s","emitted_at":"%s","type":"%s","voucher_id":"%s"%s}',
    ARGV[5], id, stamp, kind, ARGV[2], fields)
  redis.call("XADD", KEYS[7], "*", "key", ARGV[2], "record", record)
end
local most = tonumber(ARGV[4])

-- The window clock (above): a stall in progress, or one that just ended.
-- Shorter than any test or tick pause that expects a window to run on,
-- longer than any stall of the ticking ingresses (100 ms ticks); an outage
-- shorter than this is not counted.
local GAP_MS = 5000
local lost = tonumber(room[14] or "0") or 0
local stalled = tonumber(room[15] or "")
local stall_reason = room[16]
local alive = tonumber(room[17] or "")
local function window_now()
  return (stalled or now_ms) - lost
end
-- Whether a window was open at `ms` (Redis time, before any stall since).
local function open_at(ms)
  return redis.call("ZCOUNT", KEYS[6], "(" .. string.format("%d", ms - lost), "+inf") > 0
end
if not stalled and alive and now_ms - alive > GAP_MS and open_at(alive) then
  stalled, stall_reason = alive, "outage"
end
local function stall(reason)
  if not stalled and open_at(now_ms) then
    stalled, stall_reason = now_ms, reason
  end
end
local function unstall()
  if stalled then
    emit("WindowsExtended", string.format(',"from":"%s","until":"%s","reason":"%s"', rfc3339(stalled),
      rfc3339(now_ms), stall_reason))
    lost = lost + now_ms - stalled
    stalled, stall_reason = nil, nil
  end
end
-- Keeps the clock in the room and, for admit.lua, in the voucher hash.
local function keep_clock()
  redis.call("HSET", KEYS[2], "lost_ms", lost, "alive_ms", now_ms)
  if lost > 0 then
    redis.call("HSET", KEYS[1], "lost_ms", lost)
  end
  if stalled then
    redis.call("HSET", KEYS[2], "stalled_ms", stalled, "stall_reason", stall_reason)
    redis.call("HSET", KEYS[1], "stalled_ms", stalled)
  elseif room[15] or stall_reason then
    redis.call("HDEL", KEYS[2], "stalled_ms", "stall_reason")
    redis.call("HDEL", KEYS[1], "stalled_ms")
  end
end
if backlog then
  stall("backlog")
  keep_clock()
  return summary("backlog")
end

if phase == "entering" then
  phase = "ranking"
  redis.call("HSET", KEYS[2], "phase", phase)
  emit("DrawSeedRevealed", string.format(',"seed":"%s","entries":%d,"entries_hash":"%s"%s', room[1], entries, room[8],
    beacon[2] or ""))
end

if phase == "ranking" then
  local prefix = room[1] .. ":" .. room[8] .. ":"
  local batch = redis.call("ZRANGE", KEYS[3], ranked, ranked + most - 1)
  for _, user in ipairs(batch) do
    local key = tonumber(string.sub(redis.sha1hex(prefix .. user), 1, 13), 16)
    redis.call("ZADD", KEYS[5], string.format("%d", key), user)
  end
  ranked = ranked + #batch
  worked = #batch
  if ranked >= entries then
    phase = "publishing"
  end
  redis.call("HSET", KEYS[2], "ranked", ranked, "phase", phase)
  local expires = redis.call("PEXPIRETIME", KEYS[2])
  if expires > 0 then
    redis.call("PEXPIREAT", KEYS[5], expires)
  end
  if phase ~= "publishing" or worked > 0 then
    return summary("ranking")
  end
end

if phase == "publishing" then
  -- Equal keys are ordered by member (the user id's bytes): step 3.
  local batch = redis.call("ZRANGE", KEYS[5], published, published + most - 1)
  if #batch > 0 then
    local names = {}
    for i, user in ipairs(batch) do
      redis.call("HSET", KEYS[4], user, string.format("1|r|%d|", published + i))
      names[i] = '"' .. user .. '"'
    end
    local chunks = math.ceil(entries / most)
    emit("DrawRanked", string.format(',"chunk":%d,"chunks":%d,"first_rank":%d,"users":[%s]',
      math.floor(published / most), chunks, published + 1, table.concat(names, ",")))
    published = published + #batch
    worked = #batch
  end
  if published >= entries then
    phase = "drawn"
  end
  redis.call("HSET", KEYS[2], "published", published, "phase", phase)
  if phase ~= "drawn" or worked > 0 then
    return summary("ranking")
  end
end

local state = "open"
if voucher[3] == "1" then
  state = "paused"
  stall("paused")
elseif now_ms >= tonumber(voucher[2]) then
  state = "ended"
elseif stall_reason ~= "granting" then
  unstall()
end
keep_clock()
-- Windows past their end no longer hold a unit.
redis.call("ZREMRANGEBYSCORE", KEYS[6], "-inf", window_now())
open = redis.call("ZCARD", KEYS[6])
if state ~= "open" then
  return summary(state)
end
local purchase_ms = tonumber(room[5])
local until_ms = tonumber(room[13] or "")
if not selected then
  selected = math.min(math.ceil(math.max(remaining, 0) / per_win), entries)
  until_ms = window_now() + purchase_ms
  redis.call("HSET", KEYS[2], "selected", selected, "selected_until", until_ms)
  emit("DrawWinnersSelected", string.format(',"winners":%d,"purchase_until":"%s"', selected,
    rfc3339(now_ms + purchase_ms)))
end
-- Ranks 1..selected won at the draw; past them, a rank wins while the open
-- wins stand for fewer units than are left (the last may find fewer than
-- the limit: better than a unit nobody may buy).
while worked < most and cursor < entries do
  local rank = cursor + 1
  if rank > selected and open * per_win >= remaining then
    break
  end
  local user = redis.call("ZRANGE", KEYS[5], cursor, cursor)[1]
  local ends = until_ms
  if rank > selected then
    ends = window_now() + purchase_ms
    emit("DrawWinnerPromoted", string.format(',"user_id":"%s","rank":%d,"purchase_until":"%s"', user, rank,
      rfc3339(now_ms + purchase_ms)))
  end
  redis.call("HSET", KEYS[4], user, string.format("1|s|%d|%d", rank, ends))
  if ends > window_now() then
    redis.call("ZADD", KEYS[6], ends, tostring(rank))
    open = open + 1
  end
  cursor = rank
  worked = worked + 1
  won = won + 1
end
-- Winners past this call's share wait for a later call: every window
-- stands still until the last winner is granted (the "granting" stall).
if cursor < selected then
  stall("granting")
  keep_clock()
elseif stall_reason == "granting" and cursor >= selected and voucher[3] ~= "1" then
  unstall()
  keep_clock()
end
if worked > 0 then
  redis.call("HSET", KEYS[2], "cursor", cursor)
  local expires = redis.call("PEXPIRETIME", KEYS[2])
  if expires > 0 then
    redis.call("PEXPIREAT", KEYS[6], expires)
  end
end
if remaining <= 0 and cursor >= selected then
  state = "sold_out"
end
return summary(state)
