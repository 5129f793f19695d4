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
-- KEYS[6]  holds zset   <prefix>:{v:<id>}:holds    rank -> window end (ms, on the window clock):
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
-- The window clock (lua/window_clock.lua, which the gate puts before this
-- script; rfc3339 and window_clock below are its functions): window ends stand still while nobody can order ("paused",
-- "backlog", "outage") and, here, while winners past the first call wait
-- for a later one ("granting": every winner's window waits for the last
-- one to be granted). Each stall is logged when it ends (WindowsExtended).
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
local time = redis.call("TIME")
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
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

-- The window clock (lua/window_clock.lua), as the room keeps it.
local clock = window_clock(KEYS[1], KEYS[2], KEYS[6], {room[14], room[15], room[16], room[17]}, now_ms, emit)
if backlog then
  clock.stall("backlog")
  clock.keep()
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
  clock.stall("paused")
elseif now_ms >= tonumber(voucher[2]) then
  state = "ended"
elseif clock.reason ~= "granting" then
  clock.unstall()
end
clock.keep()
-- Windows past their end no longer hold a unit.
redis.call("ZREMRANGEBYSCORE", KEYS[6], "-inf", clock.now())
open = redis.call("ZCARD", KEYS[6])
if state ~= "open" then
  return summary(state)
end
local purchase_ms = tonumber(room[5])
local until_ms = tonumber(room[13] or "")
if not selected then
  selected = math.min(math.ceil(math.max(remaining, 0) / per_win), entries)
  until_ms = clock.now() + purchase_ms
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
    ends = clock.now() + purchase_ms
    emit("DrawWinnerPromoted", string.format(',"user_id":"%s","rank":%d,"purchase_until":"%s"', user, rank,
      rfc3339(now_ms + purchase_ms)))
  end
  redis.call("HSET", KEYS[4], user, string.format("1|s|%d|%d", rank, ends))
  if ends > clock.now() then
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
  clock.stall("granting")
  clock.keep()
elseif clock.reason == "granting" and cursor >= selected and voucher[3] ~= "1" then
  clock.unstall()
  clock.keep()
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
