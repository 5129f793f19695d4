-- retire_outbox.lua: removes a voucher bucket's outbox stream on a Redis
-- Cluster once it is empty and its bucket is gone (the sale's keys expired),
-- so outboxes do not pile up sale after sale. Atomic: an outbox with an
-- entry, or whose bucket still exists (it may admit again), stays.
--
-- KEYS[1]  outbox stream  <prefix>:{t}:outbox
-- KEYS[2]  voucher hash   <prefix>:{t}:voucher   (same tag: same slot)
--
-- Returns 1 when the outbox was removed, else 0.
if #KEYS ~= 2 or #ARGV ~= 0 then
  return redis.error_reply("retire_outbox.lua: expects 2 KEYS and 0 ARGV")
end
if redis.call("EXISTS", KEYS[2]) == 1 or redis.call("EXISTS", KEYS[1]) == 0 then
  return 0
end
if redis.call("XLEN", KEYS[1]) > 0 then
  return 0
end
redis.call("DEL", KEYS[1])
return 1
