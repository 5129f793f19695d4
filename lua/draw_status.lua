-- draw_status.lua: a user's entry in a draw, with the draw's progress, read
-- in one step.
--
-- KEYS[1]  room hash    <prefix>:{v:<id>}:room     (queue_open.lua "open_draw")
-- KEYS[2]  places hash  <prefix>:{v:<id>}:places   (draw_enter.lua)
-- ARGV[1]  user id
--
-- Returns {place, phase, cursor, selected, entries, now_ms, entries_ms, draw_ms, purchase_ms}: place
-- is the places hash's value ("" when the user never entered); selected "" until the winners are
-- fixed; phase "" when there is no such draw. A win's end ("1|s|<rank>|<ms>") is in Redis time.
if #KEYS ~= 2 or #ARGV ~= 1 then
  return redis.error_reply("draw_status.lua: expects 2 KEYS and 1 ARGV")
end
local clock = redis.call("TIME")
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local room = redis.call("HMGET", KEYS[1], "phase", "cursor", "selected", "entries", "entries_ms", "draw_ms",
  "purchase_ms", "lost_ms", "stalled_ms", "alive_ms")
local place = shown_in_redis_time(redis.call("HGET", KEYS[2], ARGV[1]) or "", room[8], room[9], room[10], now_ms)
return {place, room[1] or "", room[2] or "0", room[3] or "", room[4] or "0", tostring(now_ms), room[5] or "0",
  room[6] or "0", room[7] or "0"}
