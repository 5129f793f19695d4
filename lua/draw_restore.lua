-- draw_restore.lua: rebuilds a draw Redis lost from what the log says
-- (`seckill reconcile`, gate/src/draw_restore.rs), in steps: the entrants'
-- places, seqs and ranks, a chunk per call; the wins still open; then the
-- room, last. The chunks go to staging keys beside the draw's own; the
-- last step moves them in and writes the room hash in one atomic call, so
-- an ingress finds either no draw or all of it, and a draw opened meanwhile
-- (a redelivered VoucherCreated reaching an ingress between two steps) is
-- never mixed with a half-written rebuild: the last step then drops the
-- staging keys and leaves that draw as it is. Every step writes only while
-- the room is missing (a draw Redis still has is never touched), and a
-- step repeated writes the same values.
--
-- KEYS[1]  voucher hash <prefix>:{v:<id>}:voucher  (read: ends_ms; must exist: restore.lua first)
-- KEYS[2]  room hash    <prefix>:{v:<id>}:room     (queue_open.lua "open_draw" lists its fields)
-- KEYS[3]  line zset    <prefix>:{v:<id>}:line     user -> seq
-- KEYS[4]  places hash  <prefix>:{v:<id>}:places   user -> "1|<state>|<number>|<extra>": "e" entered
--                                                  (number: seq), "r" ranked, "s" won until <extra> ms,
--                                                  "u" win used by order <extra> (number: rank)
-- KEYS[5]  ranks zset   <prefix>:{v:<id>}:ranks    user -> rank (draw_advance.lua reads it by index)
-- KEYS[6]  holds zset   <prefix>:{v:<id>}:holds    rank -> window end (ms): the wins open
-- KEYS[7..10] the staging keys of KEYS[3..6]: <prefix>:{v:<id>}:line:restoring and so on
-- ARGV[1]  "places", "holds" or "room"
-- ARGV[2]  milliseconds the keys outlive the sale
-- places:  ARGV[3..] quadruples: user, seq, rank ("0": not ranked yet), place value
-- holds:   ARGV[3..] pairs: rank, window end (ms)
-- room:    ARGV[3..] field/value pairs of the room hash
--
-- Returns "written", "exists" (the room is there: nothing was written, and
-- at the room step the staging keys are dropped) or "unknown" (the voucher
-- is not loaded).
if #KEYS ~= 10 or #ARGV < 2 or (ARGV[1] ~= "places" and ARGV[1] ~= "holds" and ARGV[1] ~= "room") then
  return redis.error_reply("draw_restore.lua: expects 10 KEYS, and ARGV[1] places, holds or room")
end
local step = ARGV[1]
local width = ({places = 4, holds = 2, room = 2})[step]
if (#ARGV - 2) % width ~= 0 then
  return redis.error_reply("draw_restore.lua: " .. step .. " takes its ARGV in groups of " .. width)
end
-- STAGING_MS, stage_holds and move_staged_in: staged_restore.lua.
local ends = redis.call("HGET", KEYS[1], "ends_ms")
if not ends then
  return "unknown"
end
if redis.call("EXISTS", KEYS[2]) == 1 then
  if step == "room" then
    redis.call("DEL", KEYS[7], KEYS[8], KEYS[9], KEYS[10])
  end
  return "exists"
end
local expires = tonumber(ends) + tonumber(ARGV[2])

if step == "places" then
  for i = 3, #ARGV, 4 do
    local user, seq, rank = ARGV[i], ARGV[i + 1], ARGV[i + 2]
    redis.call("ZADD", KEYS[7], seq, user)
    redis.call("HSET", KEYS[8], user, ARGV[i + 3])
    if rank ~= "0" then
      redis.call("ZADD", KEYS[9], rank, user)
    end
  end
  for k = 7, 9 do
    redis.call("PEXPIRE", KEYS[k], STAGING_MS)
  end
elseif step == "holds" then
  stage_holds()
else
  move_staged_in(expires)
  redis.call("HSET", KEYS[2], unpack(ARGV, 3))
  redis.call("PEXPIREAT", KEYS[2], expires)
end
return "written"
