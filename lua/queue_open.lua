-- queue_open.lua: opens a queue-mode voucher's waiting room or a draw-mode
-- voucher's draw, once, and marks its seed committed once the commitment
-- is in the log.
--
-- KEYS[1]  voucher hash <prefix>:{v:<id>}:voucher  (read: ends_ms; must exist)
-- KEYS[2]  room hash    <prefix>:{v:<id>}:room     a waiting room's fields: room_fields.lua (which the
--                                                  gate puts before this script) lists them and writes
--                                                  those of a new room
--                                                  A draw's (kind "draw"): seed, token_key, entries_ms,
--                                                  draw_ms, purchase_ms, committed, phase ("entering",
--                                                  "ranking", "publishing", "drawn"), entries, chain,
--                                                  ranked, published, cursor (draw_enter.lua and
--                                                  draw_advance.lua say what they hold); with a beacon:
--                                                  beacon_round, beacon_chain (the chain as JSON),
--                                                  beacon_wait ("1" until draw_beacon.lua puts the
--                                                  round's randomness in seed), reveal_extra
-- ARGV[1]  "open", "open_draw" or "committed"
-- open:       ARGV[2] a fresh seed (64 hex digits), ARGV[3] a fresh token key, ARGV[4] opens_ms,
--             ARGV[5] factor_percent, ARGV[6] entry_rate, ARGV[7] idle_ms, ARGV[8] token_ms,
--             ARGV[9] milliseconds the keys outlive the sale, and optionally ARGV[10] the beacon round
--             the pre-queue's shuffle waits for ("" none) and ARGV[11] its chain (JSON)
-- open_draw:  ARGV[2] a fresh seed, ARGV[3] a fresh token key, ARGV[4] entries_ms, ARGV[5] draw_ms,
--             ARGV[6] purchase_ms, ARGV[7] milliseconds the keys outlive the sale, and optionally
--             ARGV[8] the beacon round the ranking waits for ("" none) and ARGV[9] its chain (JSON)
-- committed:  ARGV[2] the seed whose hash the log now holds
--
-- Returns {seed, token_key, committed} as the room has them after the call
-- (an existing room keeps its seed and key: opening again changes nothing,
-- so every ingress may open every room it hears of), or {"", "", ""} when
-- the voucher is not loaded. "committed" marks only the seed it names: a
-- room that was opened again with another seed is not marked by a late
-- answer about the first.
if #KEYS ~= 2 or (ARGV[1] ~= "open" and ARGV[1] ~= "open_draw" and ARGV[1] ~= "committed") then
  return redis.error_reply("queue_open.lua: expects 2 KEYS, and ARGV[1] must be open, open_draw or committed")
end
if ARGV[1] == "open" and #ARGV ~= 9 and #ARGV ~= 11 or ARGV[1] == "open_draw" and #ARGV ~= 7 and #ARGV ~= 9 then
  return redis.error_reply("queue_open.lua: open expects 9 or 11 ARGV, open_draw 7 or 9")
end
local ends = redis.call("HGET", KEYS[1], "ends_ms")
if not ends then
  return {"", "", ""}
end
if ARGV[1] == "committed" then
  if redis.call("HGET", KEYS[2], "seed") == ARGV[2] then
    redis.call("HSET", KEYS[2], "committed", "1")
  end
elseif ARGV[1] == "open_draw" then
  if redis.call("EXISTS", KEYS[2]) == 0 then
    redis.call("HSET", KEYS[2], "kind", "draw", "seed", ARGV[2], "token_key", ARGV[3], "entries_ms", ARGV[4],
      "draw_ms", ARGV[5], "purchase_ms", ARGV[6], "committed", "0", "phase", "entering", "entries", "0",
      "chain", "", "ranked", "0", "published", "0", "cursor", "0")
    if ARGV[8] and ARGV[8] ~= "" then
      redis.call("HSET", KEYS[2], "beacon_round", ARGV[8], "beacon_chain", ARGV[9], "beacon_wait", "1")
    end
    redis.call("PEXPIREAT", KEYS[2], tonumber(ends) + tonumber(ARGV[7]))
  end
else
  if redis.call("EXISTS", KEYS[2]) == 0 then
    redis.call("HSET", KEYS[2], unpack(room_fields(ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8],
      ARGV[10], ARGV[11])))
    redis.call("PEXPIREAT", KEYS[2], tonumber(ends) + tonumber(ARGV[9]))
  end
end
local room = redis.call("HMGET", KEYS[2], "seed", "token_key", "committed")
return {room[1] or "", room[2] or "", room[3] or ""}
