-- transfer_settle.lua: the second step of a transfer between buckets (see
-- transfer_debit.lua), on the receiving bucket, where the transfer's fate
-- is decided once and recorded: the units are credited here, or, when this
-- bucket is not in Redis (its shard lost it), the id is fenced so that no
-- later call credits it and the giving bucket takes the units back. Called
-- again (a retry, a recovery), it answers the decision it recorded.
--
-- KEYS[1]  voucher hash    <prefix>:{t}:voucher    of the receiving bucket
-- KEYS[2]  transfers hash  <prefix>:{t}:transfers  its journal
-- ARGV[1]  transfer id
-- ARGV[2]  the giving bucket's number
-- ARGV[3]  units in transit (as transfer_debit.lua debited them)
-- ARGV[4]  milliseconds the voucher's keys outlive its sale
--
-- Returns "credited" or "fenced": what became of the transfer, now or before.
if #KEYS ~= 2 or #ARGV ~= 4 then
  return redis.error_reply("transfer_settle.lua: expects 2 KEYS and 4 ARGV")
end
local units = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
if not units or units < 1 or units ~= math.floor(units) or not ttl or ttl < 1 then
  return redis.error_reply("transfer_settle.lua: units must be a positive integer, the TTL at least 1")
end
local recorded = redis.call("HGET", KEYS[2], ARGV[1])
if recorded then
  if string.sub(recorded, 1, 3) == "in|" then
    return "credited"
  end
  return "fenced"
end
local ends = redis.call("HGET", KEYS[1], "ends_ms")
if not ends then
  -- No bucket to credit: fence the id (a journal of its own, expiring on
  -- its own) and let the giving bucket take its units back.
  redis.call("HSET", KEYS[2], ARGV[1], "fenced|" .. ARGV[2] .. "|" .. ARGV[3])
  redis.call("PEXPIRE", KEYS[2], ttl)
  return "fenced"
end
redis.call("HINCRBY", KEYS[1], "remaining", units)
redis.call("HINCRBY", KEYS[1], "stock", units)
redis.call("HSET", KEYS[2], ARGV[1], "in|" .. ARGV[2] .. "|" .. ARGV[3])
redis.call("PEXPIREAT", KEYS[2], tonumber(ends) + ttl)
return "credited"
