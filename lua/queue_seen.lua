-- queue_seen.lua: marks waiting places as watched now (their holders keep a
-- stream open on some ingress), so they do not expire.
--
-- KEYS[1]  places hash  <prefix>:{v:<id>}:places   (queue_join.lua)
-- KEYS[2]  seen hash    <prefix>:{v:<id>}:seen     user -> last watched (ms)
-- ARGV[1..] user ids (at most 1000 per call)
--
-- Returns how many places were marked: a user whose place is no longer
-- waiting (served, expired) or who never joined is passed over.
if #KEYS ~= 2 or #ARGV > 1000 then
  return redis.error_reply("queue_seen.lua: expects 2 KEYS and at most 1000 ARGV")
end
local clock = redis.call("TIME")
local now = tostring(tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000))
local marked = 0
for _, user in ipairs(ARGV) do
  local place = redis.call("HGET", KEYS[1], user)
  if place and string.match(place, "^%d+|w") then
    redis.call("HSET", KEYS[2], user, now)
    marked = marked + 1
  end
end
return marked
