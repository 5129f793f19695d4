-- queue_join.lua: a user takes a place in a voucher's waiting room.
--
-- KEYS[1]  voucher hash <prefix>:{v:<id>}:voucher  fields read: begins_ms, ends_ms
-- KEYS[2]  room hash    <prefix>:{v:<id>}:room     (queue_open.lua)
-- KEYS[3]  line zset    <prefix>:{v:<id>}:line     "<user>|<attempt>" -> score: every place ever
--                                                  taken, in place order (never removed, so a
--                                                  place's rank is its number for good)
-- KEYS[4]  places hash  <prefix>:{v:<id>}:places   user -> "<attempt>|<state>|<entry>|<extra>": state w
--                                                  waiting, s served (extra: token expiry ms),
--                                                  u used (extra: the order id), x expired
-- KEYS[5]  seen hash    <prefix>:{v:<id>}:seen     user -> when the holder last watched the place (ms)
-- KEYS[6]  solved zset  <prefix>:{v:<id>}:solved   challenge nonce -> its expiry (ms): solutions spent
-- KEYS[7]  outbox stream (admit.lua's KEYS[6])
-- ARGV[1]  user id
-- ARGV[2]  the encoded QueueJoined record without pre_queue, seq and attempt: the script adds them
-- ARGV[3]  voucher id: the record's Kafka key
-- ARGV[4]  outbox bound: at this many entries nothing is written
-- ARGV[5]  the solved challenge's nonce, "" when none was presented
-- ARGV[6]  leading zero bits the solution has (checked by the caller)
-- ARGV[7]  the challenge's expiry (Unix ms, as signed)
--
-- Returns {code, attempt, state}:
--   {"joined", attempt, "w"}      a new place (the record is in the outbox)
--   {"held", attempt, state}      the user holds a place already (waiting, or served and not lapsed):
--                                 nothing changed (the place is written again, the same)
--   {"unknown_voucher", "", ""}   no such voucher, or not a queue-mode one
--   {"not_open", opens_ms, ""}    before the room opens, or before its seed is committed in the log
--   {"ended", ends_ms, ""}        after the sale
--   {"backlog_full", n, ""}       the outbox is full (the log is down): nothing changed
--   {"challenge_required", bits, ""}, {"challenge_too_easy", bits, ""}, {"challenge_expired", ms, ""},
--   {"challenge_used", "", ""}    the voucher's proof of work (challenge_bits) was missing, too easy,
--                                 expired or spent; a repeat join of a held place needs none
--
-- Before the sale begins (the Redis clock) a place's score is the user's
-- shuffle key: the first 13 hex digits of SHA-1("<seed>:<user>"), below
-- 2^52; in a room whose shuffle waits for a beacon round (beacon_round),
-- -1 until queue_advance.lua keys the whole pre-queue by the round. After, it is 2^52 + seq: first come, first placed, behind the whole
-- pre-queue. A place that is over (expired, its token lapsed unused, or its
-- token spent on an order) may be taken again, at the back: one place at a
-- time per user, one order per place.
if #KEYS ~= 7 or #ARGV ~= 7 then
  return redis.error_reply("queue_join.lua: expects 7 KEYS and 7 ARGV")
end
local voucher = redis.call("HMGET", KEYS[1], "begins_ms", "ends_ms", "mode", "challenge_bits")
local room = redis.call("HMGET", KEYS[2], "seed", "opens_ms", "committed", "beacon_round")
if not voucher[1] or voucher[3] ~= "queue" or not room[1] then
  return {"unknown_voucher", "", ""}
end
local clock = redis.call("TIME")
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
if room[3] ~= "1" or now_ms < tonumber(room[2]) then
  return {"not_open", room[2], ""}
end
local ends = tonumber(voucher[2])
if now_ms >= ends then
  return {"ended", voucher[2], ""}
end

local place = redis.call("HGET", KEYS[4], ARGV[1])
local attempt = 1
if place then
  local held, state, _, extra = string.match(place, "^(%d+)|(%a)|(%d*)|(.*)$")
  -- A token's expiry is on the window clock (window_time.lua, which the gate puts before this script).
  local window_clock = redis.call("HMGET", KEYS[2], "lost_ms", "stalled_ms", "alive_ms")
  local window_now = window_time(window_clock[1], window_clock[2], window_clock[3], now_ms)
  local lapsed = state == "x" or state == "u" or (state == "s" and tonumber(extra) <= window_now)
  if not lapsed then
    -- The same value written again: a replica's acknowledgement of this
    -- call (gate/src/replica_acks.rs) then covers the place, whichever
    -- connection first wrote it.
    redis.call("HSET", KEYS[4], ARGV[1], place)
    return {"held", held, state}
  end
  attempt = tonumber(held) + 1
end

local backlog = redis.call("XLEN", KEYS[7])
if backlog >= tonumber(ARGV[4]) then
  return {"backlog_full", tostring(backlog), ""}
end

-- The proof of work: spent once, here, with the place it pays for.
local bits = tonumber(voucher[4] or "0") or 0
if bits > 0 then
  if ARGV[5] == "" then
    return {"challenge_required", tostring(bits), ""}
  end
  if tonumber(ARGV[6]) < bits then
    return {"challenge_too_easy", tostring(bits), ""}
  end
  if now_ms >= tonumber(ARGV[7]) then
    return {"challenge_expired", ARGV[7], ""}
  end
  if redis.call("ZSCORE", KEYS[6], ARGV[5]) then
    return {"challenge_used", "", ""}
  end
  redis.call("ZREMRANGEBYSCORE", KEYS[6], "-inf", now_ms)
  redis.call("ZADD", KEYS[6], ARGV[7], ARGV[5])
end

local score, extra
if now_ms < tonumber(voucher[1]) and room[4] then
  score = -1
  extra = ',"pre_queue":true'
elseif now_ms < tonumber(voucher[1]) then
  score = tonumber(string.sub(redis.sha1hex(room[1] .. ":" .. ARGV[1]), 1, 13), 16)
  extra = ',"pre_queue":true'
else
  local seq = redis.call("HINCRBY", KEYS[2], "seq", 1)
  score = 4503599627370496 + seq
  extra = string.format(',"pre_queue":false,"seq":%d', seq)
end
local member = ARGV[1] .. "|" .. attempt
redis.call("ZADD", KEYS[3], string.format("%d", score), member)
redis.call("HSET", KEYS[4], ARGV[1], attempt .. "|w||")
redis.call("HSET", KEYS[5], ARGV[1], tostring(now_ms))
redis.call("HINCRBY", KEYS[2], "joined", 1)
local record = string.sub(ARGV[2], 1, -2) .. extra .. string.format(',"attempt":%d}', attempt)
redis.call("XADD", KEYS[7], "*", "key", ARGV[3], "record", record)
-- The room's keys live as long as the room hash (queue_open.lua set it).
local expires = redis.call("PEXPIRETIME", KEYS[2])
if expires > 0 then
  for i = 3, 6 do
    redis.call("PEXPIREAT", KEYS[i], expires)
  end
end
return {"joined", tostring(attempt), "w"}
