-- draw_beacon.lua: puts a draw's (or a waiting room's) beacon round in
-- place of its seed, once, when entries (the pre-queue) have closed and
-- before the reveal (draw_advance.lua and queue_advance.lua wait while
-- beacon_wait is "1"). The caller has fetched the round and checked its
-- signature against the chain's public key (seckill-beacon).
--
-- KEYS[1]  room hash <prefix>:{v:<id>}:room  (queue_open.lua "open_draw" or "open" with a beacon):
--                                           reads beacon_wait, beacon_round, draw_ms, phase (a draw's),
--                                           kind, revealed, closed (a room's: queue_advance.lua set it
--                                           at the start); writes seed, beacon_wait, reveal_extra
-- ARGV[1]  the round
-- ARGV[2]  its randomness (64 hex digits): the ranking's seed
-- ARGV[3]  its signature (96 hex digits), logged with the reveal
--
-- Returns one of:
--   "applied"      the seed is the round's randomness now
--   "not_waiting"  no such draw, no beacon planned, or applied before: nothing changed
--   "wrong_round"  the room waits for another round: nothing changed
--   "too_soon"     entries are still open (the Redis clock): nothing changed
if #KEYS ~= 1 or #ARGV ~= 3 then
  return redis.error_reply("draw_beacon.lua: expects 1 KEYS and 3 ARGV")
end
local room = redis.call("HMGET", KEYS[1], "beacon_wait", "beacon_round", "draw_ms", "phase", "kind", "revealed",
  "closed")
local draw = room[5] == "draw"
if room[1] ~= "1" or draw and room[4] ~= "entering" or not draw and room[6] == "1" then
  return "not_waiting"
end
if room[2] ~= ARGV[1] then
  return "wrong_round"
end
local clock = redis.call("TIME")
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
if draw and now_ms < tonumber(room[3]) or not draw and room[7] ~= "1" then
  return "too_soon"
end
redis.call("HSET", KEYS[1], "seed", ARGV[2], "beacon_wait", "0",
  "reveal_extra", string.format(',"beacon":{"round":%d,"signature":"%s"}', tonumber(ARGV[1]), ARGV[3]))
return "applied"
