-- transfer_debit.lua: the first step of moving units between two buckets of
-- a voucher split across shards: takes them from the giving bucket and
-- records the transfer there as pending. Exactly-once across crashes, with
-- transfer_settle.lua (on the receiving bucket) and transfer_finish.lua
-- (back on this one):
--   1. debit  (here)       remaining and stock -= n; journal: out|to|n|pending; in_transit += n
--   2. settle (receiver)   credits n (journal: in|from|n), or, if that bucket is not in Redis, fences the
--                          id (journal: fenced|from|n); the receiver's journal records the decision once
--   3. finish (here)       pending -> done (credited) or returned (fenced: the n units come back here);
--                          in_transit -= n
-- A transfer stopped after any step is completed by whoever finds it pending
-- (in_transit > 0): settling again repeats the recorded decision and
-- finishing again changes nothing, so no unit is created or lost.
--
-- KEYS[1]  voucher hash    <prefix>:{t}:voucher    of the giving bucket
-- KEYS[2]  transfers hash  <prefix>:{t}:transfers  its journal
-- ARGV[1]  transfer id (a UUIDv7, unique per transfer)
-- ARGV[2]  the receiving bucket's number
-- ARGV[3]  units wanted (integer >= 1): at most this many are taken, at most what is left
-- ARGV[4]  milliseconds the voucher's keys outlive its sale (the journal expires with the others)
--
-- Returns {code, units}, both strings:
--   {"debited", n}          n units (1 to ARGV[3]) left this bucket, now in transit
--   {"repeated", n}         this transfer id was debited before (a retried call); nothing changed
--   {"dry", "0"}            nothing left to give; nothing changed
--   {"frozen", until_ms}    a reconcile stopped transfers until then; nothing changed
--   {"paused", ""}          this bucket is paused; nothing changed
--   {"not_open", begins_ms} this bucket's sale has not begun on this Redis's clock; nothing changed
--   {"unknown_voucher", ""} no such bucket
--
-- A bucket lends only what it could sell itself. Buckets sit on different
-- masters: a failover can lose a pause that reached only some of them, and
-- a master whose clock runs fast opens its buckets early. Were the others
-- to borrow from a paused or unopened bucket, a pause would stop only part
-- of the stock, and most of it could sell before the start.
if #KEYS ~= 2 or #ARGV ~= 4 then
  return redis.error_reply("transfer_debit.lua: expects 2 KEYS and 4 ARGV")
end
local wanted = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
if not wanted or wanted < 1 or wanted ~= math.floor(wanted) or not ttl or ttl < 1 then
  return redis.error_reply("transfer_debit.lua: units wanted must be a positive integer, the TTL at least 1")
end
local voucher = redis.call("HMGET", KEYS[1], "remaining", "ends_ms", "transfers_frozen_until_ms", "paused", "begins_ms")
if not voucher[1] then
  return {"unknown_voucher", ""}
end
local recorded = redis.call("HGET", KEYS[2], ARGV[1])
if recorded then
  return {"repeated", string.match(recorded, "^out|[^|]*|(%d+)|") or "0"}
end
local clock = redis.call("TIME")
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
if voucher[3] and now_ms < tonumber(voucher[3]) then
  return {"frozen", voucher[3]}
end
if voucher[4] == "1" then
  return {"paused", ""}
end
if voucher[5] and now_ms < tonumber(voucher[5]) then
  return {"not_open", voucher[5]}
end
local units = math.min(wanted, tonumber(voucher[1]))
if units < 1 then
  return {"dry", "0"}
end
redis.call("HINCRBY", KEYS[1], "remaining", -units)
redis.call("HINCRBY", KEYS[1], "stock", -units)
redis.call("HINCRBY", KEYS[1], "in_transit", units)
redis.call("HSET", KEYS[2], ARGV[1], "out|" .. ARGV[2] .. "|" .. units .. "|pending")
redis.call("PEXPIREAT", KEYS[2], tonumber(voucher[2]) + ttl)
return {"debited", tostring(units)}
