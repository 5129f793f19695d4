-- queue_restore.lua: rebuilds a beacon room Redis lost before its reveal,
-- from the places the log holds (gate/src/room_restore.rs). Writes only
-- while the room hash is missing, so a room Redis still has (or one an
-- ingress opened meanwhile) is never touched.
--
-- KEYS[1]  voucher hash <prefix>:{v:<id>}:voucher  (read: ends_ms; must exist)
-- KEYS[2]  room hash    <prefix>:{v:<id>}:room     (queue_open.lua)
-- KEYS[3]  line zset    <prefix>:{v:<id>}:line     (queue_join.lua)
-- KEYS[4]  places hash  <prefix>:{v:<id>}:places   (queue_join.lua)
-- KEYS[5]  seen hash    <prefix>:{v:<id>}:seen     (queue_join.lua)
-- ARGV[1]  a fresh seed, ARGV[2] a fresh token key, ARGV[3] opens_ms, ARGV[4] factor_percent,
-- ARGV[5]  entry_rate, ARGV[6] idle_ms, ARGV[7] token_ms, ARGV[8] milliseconds the keys outlive
--          the sale, ARGV[9] the beacon round, ARGV[10] its chain (JSON): as queue_open.lua's open
-- ARGV[11] P, the pre-queue's size; ARGV[12 .. 11+P] the pre-queue's user ids; then pairs
--          (seq, user id): the joins after the start
--
-- The room comes back as queue_open.lua opens one (a new seed, not
-- committed: the ingresses log its commitment; a beacon room's shuffle does
-- not use it), waiting for its round again (beacon_wait "1"): the ingresses
-- fetch it again and queue_advance.lua hashes and keys the whole pre-queue
-- afresh, so the places are those the round determines, whatever keying
-- had done before the loss. Pre-queue places are back at -1 (unkeyed), the
-- joins after the start at 2^52 + seq; every place waiting, seen now (when
-- its holder last watched it was Redis's alone).
--
-- Returns "rebuilt", "kept" (the room is there) or "no_voucher".
if #KEYS ~= 5 or #ARGV < 11 then
  return redis.error_reply("queue_restore.lua: expects 5 KEYS and at least 11 ARGV")
end
local pre = tonumber(ARGV[11])
if not pre or (#ARGV - 11 - pre) % 2 ~= 0 or #ARGV < 11 + pre then
  return redis.error_reply("queue_restore.lua: ARGV[11] must count the pre-queue, then (seq, user) pairs")
end
local ends = redis.call("HGET", KEYS[1], "ends_ms")
if not ends then
  return "no_voucher"
end
if redis.call("EXISTS", KEYS[2]) == 1 then
  return "kept"
end
local clock = redis.call("TIME")
local now_ms = tostring(tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000))
-- What is left of the lost room without its hash is not mixed in.
redis.call("DEL", KEYS[3], KEYS[4], KEYS[5])
local function place(score, user)
  redis.call("ZADD", KEYS[3], score, user .. "|1")
  redis.call("HSET", KEYS[4], user, "1|w||")
  redis.call("HSET", KEYS[5], user, now_ms)
end
for i = 12, 11 + pre do
  place("-1", ARGV[i])
end
local seq = 0
for i = 12 + pre, #ARGV, 2 do
  local s = tonumber(ARGV[i])
  place(string.format("%d", 4503599627370496 + s), ARGV[i + 1])
  seq = math.max(seq, s)
end
redis.call("HSET", KEYS[2], "seed", ARGV[1], "token_key", ARGV[2], "opens_ms", ARGV[3],
  "factor_percent", ARGV[4], "entry_rate", ARGV[5], "idle_ms", ARGV[6], "token_ms", ARGV[7],
  "committed", "0", "revealed", "0", "cursor", "0", "issued", "0", "expired", "0", "seq", seq,
  "joined", pre + math.floor((#ARGV - 11 - pre) / 2), "beacon_round", ARGV[9], "beacon_chain", ARGV[10],
  "beacon_wait", "1", "pre_hashed", "0", "pre_chain", "")
local expires = tonumber(ends) + tonumber(ARGV[8])
for i = 2, 5 do
  redis.call("PEXPIREAT", KEYS[i], expires)
end
return "rebuilt"
