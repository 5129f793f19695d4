-- queue_restore.lua: rebuilds a waiting room Redis lost, from the places the
-- log holds (gate/src/room_restore.rs; gate/src/room_revealed.rs for one
-- revealed already), in steps, so that no call holds Redis for long however
-- large the pre-queue: the places, at most 1,000 a call (a longer step is
-- refused), the entries open, as many a call, then the room, last. They go to
-- staging keys beside the room's own; the last step moves them in and
-- writes the room hash in one atomic call, so until then the room is
-- missing (joins are answered unknown_voucher, nobody is served) and an
-- ingress finds either no room or all of it. Every step writes only while
-- the room hash is missing, and a step repeated writes the same places (the
-- log only grows), so a restorer that dies between steps leaves no room,
-- and the next `seckill reconcile` writes every step again and finishes
-- it; staging keys nobody moves in expire after an hour. A room opened
-- meanwhile (a redelivered VoucherCreated reaching an ingress) is never
-- mixed with half a rebuild: any step that finds it drops the staging keys
-- and leaves it as it is.
--
-- KEYS[1]  voucher hash <prefix>:{v:<id>}:voucher  (read: ends_ms; must exist: restore.lua first)
-- KEYS[2]  room hash    <prefix>:{v:<id>}:room     (room_fields.lua lists its fields)
-- KEYS[3]  line zset    <prefix>:{v:<id>}:line     (queue_join.lua)
-- KEYS[4]  places hash  <prefix>:{v:<id>}:places   (queue_join.lua)
-- KEYS[5]  seen hash    <prefix>:{v:<id>}:seen     (queue_join.lua)
-- KEYS[6]  holds zset   <prefix>:{v:<id>}:holds    (queue_advance.lua): the entries open
-- KEYS[7..10] the staging keys of KEYS[3..6]: <prefix>:{v:<id>}:line:restoring and so on
-- ARGV[1]  "places", "holds" or "room"
-- ARGV[2]  milliseconds the keys outlive the sale
-- places:  ARGV[3..] quadruples (score, user id, attempt, place value): the line's member
--          "<user>|<attempt>" at score, and the user's value in the places hash (queue_join.lua
--          lists the forms; "": a place passed that the user took again later, its member only)
-- holds:   ARGV[3..] pairs (entry, its token's end in ms): the entries issued and not spent
-- room:    ARGV[3] the seed, ARGV[4] a fresh token key, ARGV[5] opens_ms, ARGV[6] factor_percent,
--          ARGV[7] entry_rate, ARGV[8] idle_ms, ARGV[9] token_ms, ARGV[10] the beacon round,
--          ARGV[11] its chain (JSON): as queue_open.lua's open; then field/value pairs the room
--          holds beyond a new one's (a revealed room's: committed, revealed, cursor, …; a sealed
--          room's: committed)
--
-- Before the reveal a beacon room comes back as queue_open.lua opens one
-- (room_fields.lua: a fresh seed, not committed: the ingresses log its
-- commitment; a beacon room's shuffle does not use it), waiting for its
-- round again (beacon_wait "1"): the ingresses fetch it again and
-- queue_advance.lua hashes and keys the whole pre-queue afresh, so the
-- places are those the round determines, whatever keying had done before
-- the loss. Pre-queue places are back at -1 (unkeyed), the joins after the
-- start at 2^52 + seq (queue_join.lua). A room without a beacon whose seed
-- the log holds sealed comes back with that seed (ARGV[3]) and committed
-- "1" (ARGV[12..]: its hash is in the log), its pre-queue places at the
-- keys queue_join.lua gave them under it. After the reveal the places come
-- back keyed in the round's order, those passed as served, spent or
-- skipped, and the room revealed, its cursor past them (ARGV[12..]). The
-- room's seq is the highest seq in its line, joined the line's count.
-- Every place is seen when its step ran (when its holder last watched it
-- was Redis's alone). The window clock starts afresh (nothing lost): the
-- entries' ends given include the logged stalls.
--
-- Returns "written", "exists" (the room is there: nothing was written, the
-- staging keys are dropped) or "unknown" (the voucher is not loaded).
if #KEYS ~= 10 or #ARGV < 2 or (ARGV[1] ~= "places" and ARGV[1] ~= "holds" and ARGV[1] ~= "room") then
  return redis.error_reply("queue_restore.lua: expects 10 KEYS, and ARGV[1] places, holds or room")
end
local step = ARGV[1]
local group = ({places = 4, holds = 2})[step]
if group and (#ARGV - 2) % group ~= 0 or step == "room" and (#ARGV < 11 or #ARGV % 2 == 0) then
  return redis.error_reply("queue_restore.lua: places takes quadruples, holds pairs, room 9 values and pairs")
end
-- A step's length is bounded here, not only by its caller
-- (gate/src/room_restore.rs, MOST_PLACES_PER_RESTORE): no call is long.
if group and (#ARGV - 2) / group > 1000 then
  return redis.error_reply("queue_restore.lua: at most 1000 places or holds a call")
end
-- STAGING_MS, stage_holds and move_staged_in: staged_restore.lua.
local AFTER_START = 4503599627370496
local ends = redis.call("HGET", KEYS[1], "ends_ms")
if not ends then
  return "unknown"
end
if redis.call("EXISTS", KEYS[2]) == 1 then
  redis.call("DEL", KEYS[7], KEYS[8], KEYS[9], KEYS[10])
  return "exists"
end

if step == "places" then
  local clock = redis.call("TIME")
  local now_ms = tostring(tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000))
  for i = 3, #ARGV, 4 do
    local user = ARGV[i + 1]
    redis.call("ZADD", KEYS[7], ARGV[i], user .. "|" .. ARGV[i + 2])
    if ARGV[i + 3] ~= "" then
      redis.call("HSET", KEYS[8], user, ARGV[i + 3])
    end
    redis.call("HSET", KEYS[9], user, now_ms)
  end
  for k = 7, 9 do
    redis.call("PEXPIRE", KEYS[k], STAGING_MS)
  end
  return "written"
elseif step == "holds" then
  stage_holds()
  return "written"
end

local expires = tonumber(ends) + tonumber(ARGV[2])
move_staged_in(expires)
local seq = 0
local last = redis.call("ZRANGE", KEYS[3], "+inf", AFTER_START, "BYSCORE", "REV", "LIMIT", 0, 1, "WITHSCORES")
if last[2] then
  seq = tonumber(last[2]) - AFTER_START
end
redis.call("HSET", KEYS[2], unpack(room_fields(ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9],
  ARGV[10], ARGV[11])))
redis.call("HSET", KEYS[2], "seq", string.format("%d", seq), "joined", redis.call("ZCARD", KEYS[3]))
if #ARGV > 11 then
  redis.call("HSET", KEYS[2], unpack(ARGV, 12))
end
redis.call("PEXPIREAT", KEYS[2], expires)
return "written"
