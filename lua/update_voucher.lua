-- update_voucher.lua: applies one admin update (VoucherUpdated) to the gate,
-- exactly once. Both the ingress (at once) and the processor (following the
-- log, so an update survives an ingress crash) call it with the same update.
-- A voucher split into buckets gets the update in every bucket ({t} is the
-- bucket's tag), each bucket applying it once; the added units are split
-- between the buckets like the stock.
--
-- KEYS[1]  voucher hash   <prefix>:{t}:voucher
-- KEYS[2]  updates set    <prefix>:{t}:updates   ids of the updates applied
-- KEYS[3]  bought hash    <prefix>:{t}:bought
-- KEYS[4]  orders hash    <prefix>:{t}:orders
-- KEYS[5]  released set   <prefix>:{t}:released
-- KEYS[6]  retries hash   <prefix>:{t}:retries
-- KEYS[7]  admitted hash  <prefix>:{t}:admitted
-- KEYS[8]  added hash     <prefix>:{t}:added     update id -> units it added to this bucket (and, in a
--                                                bucket of a split voucher, "<update id>:total" -> to the voucher)
-- KEYS[9]  transfers hash <prefix>:{t}:transfers
-- KEYS[10] newest end     <prefix>:{t}:newest_end    the end this update sets, when it moves the end
--                                                    (read by load_voucher.lua)
-- KEYS[11..18] the waiting room's or the draw's keys and the proof and pace keys admit.lua keeps:
--          room, line, places, seen, holds, ranks, solved, pace (<prefix>:{t}:room and so on; a bucket
--          of a split voucher has only solved and pace): they expire with the sale like the rest, so
--          a sale whose end moves past the old end plus ARGV[5] keeps its room, draw and spent proofs
-- ARGV[1]  update id: the record's event id, a UUIDv7, so ids of later
--          updates compare greater as strings
-- ARGV[2]  paused: "1", "0", or "" to leave it
-- ARGV[3]  ends_ms: Unix milliseconds, or "" to leave it
-- ARGV[4]  units to add to this bucket's stock and remaining (integer >= 0)
-- ARGV[5]  milliseconds the voucher's keys outlive its sale (integer >= 1)
-- ARGV[6]  units the update adds to the whole voucher: added to voucher_stock
--          when the bucket has one (a bucket of a split voucher)
-- ARGV[7]  this bucket's index (0 for a voucher not split)
--
-- Returns {code, stock, remaining, paused, begins_ms, ends_ms, voucher_stock,
-- added}, all strings (voucher_stock "" for a voucher not split; added: the
-- units this update added to the whole voucher, "" when not applied now):
--   code "applied"          the update took effect now
--   code "repeated"         it had been applied before; nothing changed
--   code "unknown_voucher"  no such voucher bucket (the other fields are "")
-- Pause and end time only move to a newer update's values (settings_version),
-- so an older update applied late never undoes a newer one; added units are
-- added once per update id whatever the order, and recorded by id (KEYS[8]),
-- so restore.lua can count an update applied after the log it restores from
-- was read. Every key of the voucher but KEYS[10] (KEYS[3..7], [9] and [11..18] are passed for this alone)
-- then expires ARGV[5] ms after the sale's end as it now stands, so moving
-- the end moves the cleaning; an end moved so far back that this time has
-- passed removes the sale's keys.
--
-- No voucher's stock passes MAX_STOCK: the units added are capped here, in
-- the same atomic step that adds them, at what is left below it (so two
-- concurrent updates that each fit alone cannot together pass it), and both
-- stock and remaining grow by the capped amount. The processor caps the
-- persistent stock the same way (StockLevel::add); a cap is a minimum, so
-- the total is the same whichever of two updates arrives first.
local MAX_STOCK = 1000000000
if #KEYS ~= 18 or #ARGV ~= 7 then
  return redis.error_reply("update_voucher.lua: expects 18 KEYS and 7 ARGV")
end
local ttl = tonumber(ARGV[5])
if not ttl or ttl < 1 then
  return redis.error_reply("update_voucher.lua: the TTL must be a number, at least 1")
end
local add = tonumber(ARGV[4])
local add_total = tonumber(ARGV[6])
if not add or add < 0 or add ~= math.floor(add) or not add_total or add_total < add then
  return redis.error_reply("update_voucher.lua: units to add must be non-negative integers, the total at least the bucket's")
end
if ARGV[2] ~= "" and ARGV[2] ~= "0" and ARGV[2] ~= "1" then
  return redis.error_reply("update_voucher.lua: paused must be 1, 0 or empty")
end
if ARGV[3] ~= "" and not tonumber(ARGV[3]) then
  return redis.error_reply("update_voucher.lua: ends_ms must be a number or empty")
end

local bucket = tonumber(ARGV[7])
if not bucket or bucket < 0 then
  return redis.error_reply("update_voucher.lua: the bucket index must be a non-negative integer")
end

local function state(code, added)
  local v = redis.call("HMGET", KEYS[1], "stock", "remaining", "paused", "begins_ms", "ends_ms", "voucher_stock")
  return {code, v[1], v[2], v[3] or "0", v[4], v[5], v[6] or "", added}
end

if redis.call("EXISTS", KEYS[1]) == 0 then
  return {"unknown_voucher", "", "", "", "", "", "", ""}
end
if redis.call("SADD", KEYS[2], ARGV[1]) == 0 then
  -- Written again, the same value: the caller may follow this call with
  -- WAIT (gate/src/replica_acks.rs), which on a Redis after 7.0 covers a
  -- connection's writes only; a repeat of an update whose first answer no
  -- replica acknowledged must still wait for the first call's write.
  redis.call("HSET", KEYS[1], "stock", redis.call("HGET", KEYS[1], "stock"))
  return state("repeated", "")
end
local current = redis.call("HMGET", KEYS[1], "stock", "voucher_stock", "shards")
local whole = tonumber(current[2] or current[1]) or 0
local room = math.max(0, MAX_STOCK - whole)
if add_total > room then
  -- The bucket's share of what fits, split as the gate splits stock: the
  -- quotient, one more for the first (room mod shards) buckets.
  local shards = tonumber(current[3] or "1")
  add_total = room
  add = math.floor(room / shards) + ((bucket < room % shards) and 1 or 0)
end
if add > 0 then
  redis.call("HINCRBY", KEYS[1], "stock", add)
  redis.call("HINCRBY", KEYS[1], "remaining", add)
  redis.call("HSET", KEYS[8], ARGV[1], add)
end
if add_total > 0 and redis.call("HEXISTS", KEYS[1], "voucher_stock") == 1 then
  redis.call("HINCRBY", KEYS[1], "voucher_stock", add_total)
  -- For restore.lua, like the bucket's own share above.
  redis.call("HSET", KEYS[8], ARGV[1] .. ":total", add_total)
end
local newest = redis.call("HGET", KEYS[1], "settings_version")
if (ARGV[2] ~= "" or ARGV[3] ~= "") and (not newest or ARGV[1] > newest) then
  if ARGV[2] ~= "" then
    redis.call("HSET", KEYS[1], "paused", ARGV[2])
  end
  if ARGV[3] ~= "" then
    -- Remembered apart from the sale's keys, until the keys of every end
    -- the sale had would have expired: a definition delivered again before
    -- then is loaded with this end (load_voucher.lua), not its first one.
    local previous_end = tonumber(redis.call("HGET", KEYS[1], "ends_ms"))
    local keep_until = math.max(previous_end + ttl, tonumber(ARGV[3]) + ttl)
    keep_until = math.max(keep_until, redis.call("PEXPIRETIME", KEYS[10]))
    redis.call("SET", KEYS[10], ARGV[3], "PXAT", string.format("%d", keep_until))
    redis.call("HSET", KEYS[1], "ends_ms", ARGV[3])
  end
  redis.call("HSET", KEYS[1], "settings_version", ARGV[1])
end
local applied = state("applied", string.format("%d", add_total))
local expires = tonumber(applied[6]) + ttl
-- A key admit.lua writes next may not exist yet: it sets the time itself.
redis.call("HDEL", KEYS[1], "keys_expire_ms")
for i = 1, 9 do
  redis.call("PEXPIREAT", KEYS[i], expires)
end
-- A key that does not exist (no room, no proof spent yet) stays absent.
for i = 11, 18 do
  redis.call("PEXPIREAT", KEYS[i], expires)
end
return applied
