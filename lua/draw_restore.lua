-- draw_restore.lua: rebuilds a draw Redis lost from what the log says
-- (`seckill reconcile`, gate/src/draw_restore.rs), in steps: the entrants'
-- places, seqs and ranks, a chunk per call; the wins still open; then the
-- room hash, last, so an ingress finds either no draw or all of it. Every
-- step writes only while the room is missing (a draw Redis still has is
-- never touched), and a step repeated writes the same values.
--
-- KEYS[1]  voucher hash <prefix>:{v:<id>}:voucher  (read: ends_ms; must exist: restore.lua first)
-- KEYS[2]  room hash    <prefix>:{v:<id>}:room     (queue_open.lua "open_draw" lists its fields)
-- KEYS[3]  line zset    <prefix>:{v:<id>}:line     user -> seq
-- KEYS[4]  places hash  <prefix>:{v:<id>}:places   user -> "1|<state>|<number>|<extra>": "e" entered
--                                                  (number: seq), "r" ranked, "s" won until <extra> ms,
--                                                  "u" win used by order <extra> (number: rank)
-- KEYS[5]  ranks zset   <prefix>:{v:<id>}:ranks    user -> rank (draw_advance.lua reads it by index)
-- KEYS[6]  holds zset   <prefix>:{v:<id>}:holds    rank -> window end (ms): the wins open
-- ARGV[1]  "places", "holds" or "room"
-- ARGV[2]  milliseconds the keys outlive the sale
-- places:  ARGV[3..] quadruples: user, seq, rank ("0": not ranked yet), place value
-- holds:   ARGV[3..] pairs: rank, window end (ms)
-- room:    ARGV[3..] field/value pairs of the room hash
--
-- Returns "written", "exists" (the room is there: nothing was written) or
-- "unknown" (the voucher is not loaded).
if #KEYS ~= 6 or #ARGV < 2 or (ARGV[1] ~= "places" and ARGV[1] ~= "holds" and ARGV[1] ~= "room") then
  return redis.error_reply("draw_restore.lua: expects 6 KEYS, and ARGV[1] places, holds or room")
end
local step = ARGV[1]
local width = ({places = 4, holds = 2, room = 2})[step]
if (#ARGV - 2) % width ~= 0 then
  return redis.error_reply("draw_restore.lua: " .. step .. " takes its ARGV in groups of " .. width)
end
local ends = redis.call("HGET", KEYS[1], "ends_ms")
if not ends then
  return "unknown"
end
if redis.call("EXISTS", KEYS[2]) == 1 then
  return "exists"
end
local expires = tonumber(ends) + tonumber(ARGV[2])

if step == "places" then
  for i = 3, #ARGV, 4 do
    local user, seq, rank = ARGV[i], ARGV[i + 1], ARGV[i + 2]
    redis.call("ZADD", KEYS[3], seq, user)
    redis.call("HSET", KEYS[4], user, ARGV[i + 3])
    if rank ~= "0" then
      redis.call("ZADD", KEYS[5], rank, user)
    end
  end
  for k = 3, 5 do
    redis.call("PEXPIREAT", KEYS[k], expires)
  end
elseif step == "holds" then
  for i = 3, #ARGV, 2 do
    redis.call("ZADD", KEYS[6], ARGV[i + 1], ARGV[i])
  end
  redis.call("PEXPIREAT", KEYS[6], expires)
else
  redis.call("HSET", KEYS[2], unpack(ARGV, 3))
  redis.call("PEXPIREAT", KEYS[2], expires)
end
return "written"
