-- freeze_transfers.lua: stops (or lets again) new transfers out of one bucket
-- of a voucher split across shards, while `seckill reconcile` restores it.
-- transfer_debit.lua refuses while the time set here is ahead of the Redis
-- clock, so a reconcile that dies leaves the stop to run out by itself.
--
-- KEYS[1]  voucher hash  <prefix>:{t}:voucher
-- ARGV[1]  Unix milliseconds until which transfers stay stopped, or "" to
--          let them go on now
--
-- Returns 1 when the bucket exists (and was changed), 0 otherwise (nothing
-- is written: a bucket that is not in Redis is never created partly).
if #KEYS ~= 1 or #ARGV ~= 1 then
  return redis.error_reply("freeze_transfers.lua: expects 1 KEYS and 1 ARGV")
end
if ARGV[1] ~= "" and not tonumber(ARGV[1]) then
  return redis.error_reply("freeze_transfers.lua: the time must be a number or empty")
end
if redis.call("EXISTS", KEYS[1]) == 0 then
  return 0
end
if ARGV[1] == "" then
  redis.call("HDEL", KEYS[1], "transfers_frozen_until_ms")
else
  redis.call("HSET", KEYS[1], "transfers_frozen_until_ms", ARGV[1])
end
return 1
