-- draw_enter.lua: a user enters a draw sale.
--
-- KEYS[1]  voucher hash <prefix>:{v:<id>}:voucher  fields read: mode, ends_ms, challenge_bits
-- KEYS[2]  room hash    <prefix>:{v:<id>}:room     the draw's state (queue_open.lua "open_draw"); here:
--                                                  entries (the count), chain (the entry list's hash),
--                                                  seq_offset (read: added to the seq logged; draw_restore.lua)
-- KEYS[3]  line zset    <prefix>:{v:<id>}:line     user -> seq: the entries in the order taken
-- KEYS[4]  places hash  <prefix>:{v:<id>}:places   user -> "1|<state>|<number>|<extra>": e entered (number:
--                                                  seq), r ranked (number: rank), s won (extra: window
--                                                  end ms), u used (extra: the order id)
-- KEYS[5]  solved zset  <prefix>:{v:<id>}:solved   challenge nonce -> its expiry (ms): solutions spent
-- KEYS[6]  outbox stream (admit.lua's KEYS[6])
-- ARGV[1]  user id
-- ARGV[2]  the encoded DrawEntered record without seq: the script adds it
-- ARGV[3]  voucher id: the record's Kafka key
-- ARGV[4]  outbox bound: at this many entries nothing is written
-- ARGV[5]  the solved challenge's nonce, "" when none was presented
-- ARGV[6]  leading zero bits the solution has (checked by the caller)
-- ARGV[7]  the challenge's expiry (Unix ms, as signed)
--
-- Returns {code, detail}:
--   {"entered", seq}              a new entry (its record is in the outbox)
--   {"held", seq}                 the user entered before: nothing changed (no solution is spent; the
--                                 entry is written again, the same)
--   {"unknown_voucher", ""}       no such voucher, or not a draw
--   {"not_open", opens_ms}        before entries open, or before the seed is committed in the log
--   {"closed", draw_ms}           entries closed (the draw was made)
--   {"backlog_full", n}           the outbox is full (the log is down): nothing changed
--   {"challenge_required", bits}  the voucher asks for a proof of work and none was presented
--   {"challenge_too_easy", bits}  the solution has fewer bits than the voucher asks
--   {"challenge_expired", ms}     the challenge's time is over (the Redis clock)
--   {"challenge_used", ""}        this challenge paid for a request before
--
-- The entry list's hash is chained here, one SHA-1 per entry (core's
-- draw.rs step 1), so the draw needs no pass over the list to hash it and
-- the list is fixed, entry by entry, in the order the log receives it.
if #KEYS ~= 6 or #ARGV ~= 7 then
  return redis.error_reply("draw_enter.lua: expects 6 KEYS and 7 ARGV")
end
local voucher = redis.call("HMGET", KEYS[1], "mode", "ends_ms", "challenge_bits")
local room = redis.call("HMGET", KEYS[2], "committed", "entries_ms", "draw_ms", "phase", "chain", "seq_offset")
if voucher[1] ~= "draw" or not room[2] then
  return {"unknown_voucher", ""}
end
local held = redis.call("HGET", KEYS[4], ARGV[1])
if held then
  -- The same value written again: a replica's acknowledgement of this call
  -- (gate/src/replica_acks.rs) then covers the entry, whichever connection
  -- first wrote it.
  redis.call("HSET", KEYS[4], ARGV[1], held)
  return {"held", string.match(held, "^%d+|%a|(%d*)|") or ""}
end
local clock = redis.call("TIME")
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
if room[1] ~= "1" or now_ms < tonumber(room[2]) then
  return {"not_open", room[2]}
end
if now_ms >= tonumber(room[3]) or room[4] ~= "entering" then
  return {"closed", room[3]}
end
local backlog = redis.call("XLEN", KEYS[6])
if backlog >= tonumber(ARGV[4]) then
  return {"backlog_full", tostring(backlog)}
end

-- The proof of work: spent once, here, with the entry it pays for.
local bits = tonumber(voucher[3] or "0") or 0
if bits > 0 then
  if ARGV[5] == "" then
    return {"challenge_required", tostring(bits)}
  end
  if tonumber(ARGV[6]) < bits then
    return {"challenge_too_easy", tostring(bits)}
  end
  if now_ms >= tonumber(ARGV[7]) then
    return {"challenge_expired", ARGV[7]}
  end
  if redis.call("ZSCORE", KEYS[5], ARGV[5]) then
    return {"challenge_used", ""}
  end
  redis.call("ZREMRANGEBYSCORE", KEYS[5], "-inf", now_ms)
  redis.call("ZADD", KEYS[5], ARGV[7], ARGV[5])
end

local seq = redis.call("HINCRBY", KEYS[2], "entries", 1)
redis.call("HSET", KEYS[2], "chain", redis.sha1hex((room[5] or "") .. ":" .. ARGV[1]))
redis.call("ZADD", KEYS[3], seq, ARGV[1])
redis.call("HSET", KEYS[4], ARGV[1], "1|e|" .. seq .. "|")
-- A draw rebuilt from a log with gaps (gate/src/draw_restore.rs) numbers
-- its entries after the ones it kept; the log goes on after the last seq
-- it holds (seq_offset), never repeating one.
local logged_seq = seq + (tonumber(room[6] or "0") or 0)
local record = string.sub(ARGV[2], 1, -2) .. string.format(',"seq":%d}', logged_seq)
redis.call("XADD", KEYS[6], "*", "key", ARGV[3], "record", record)
-- The draw's keys live as long as the room hash (queue_open.lua set it).
local expires = redis.call("PEXPIRETIME", KEYS[2])
if expires > 0 then
  for i = 3, 5 do
    redis.call("PEXPIREAT", KEYS[i], expires)
  end
end
return {"entered", tostring(seq)}
