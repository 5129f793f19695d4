-- queue_status.lua: a user's place in a waiting room, read as the user
-- watches it (which keeps the place from expiring).
--
-- KEYS[1]  room hash    <prefix>:{v:<id>}:room     (queue_open.lua)
-- KEYS[2]  line zset    <prefix>:{v:<id>}:line     (queue_join.lua)
-- KEYS[3]  places hash  <prefix>:{v:<id>}:places   (queue_join.lua)
-- KEYS[4]  seen hash    <prefix>:{v:<id>}:seen     user -> last watched (ms): set here while waiting
-- ARGV[1]  user id
--
-- Returns {place, rank, cursor, revealed, now_ms}: place is the places
-- hash's value ("" when the user never joined); rank the place's 0-based
-- rank in the line (-1 when none); revealed "1" once the seed is public
-- (before that the pre-queue's ranks are not shown to anyone). A served
-- token's expiry ("<attempt>|s|<entry>|<ms>") is in Redis time.
if #KEYS ~= 4 or #ARGV ~= 1 then
  return redis.error_reply("queue_status.lua: expects 4 KEYS and 1 ARGV")
end
local clock = redis.call("TIME")
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local room = redis.call("HMGET", KEYS[1], "cursor", "revealed", "lost_ms", "stalled_ms", "alive_ms")
local place = redis.call("HGET", KEYS[3], ARGV[1])
if not place then
  return {"", -1, room[1] or "0", room[2] or "0", tostring(now_ms)}
end
local attempt, state = string.match(place, "^(%d+)|(%a)")
if state == "w" then
  redis.call("HSET", KEYS[4], ARGV[1], tostring(now_ms))
end
local rank = redis.call("ZRANK", KEYS[2], ARGV[1] .. "|" .. attempt) or -1
local shown = shown_in_redis_time(place, room[3], room[4], room[5], now_ms)
return {shown, rank, room[1] or "0", room[2] or "0", tostring(now_ms)}
