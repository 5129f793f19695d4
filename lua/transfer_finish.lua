-- transfer_finish.lua: the last step of a transfer between buckets (see
-- transfer_debit.lua), on the giving bucket: closes its pending record as
-- the receiving bucket decided (transfer_settle.lua). Credited: the units
-- are the receiver's now. Fenced: they come back to this bucket. Once only.
--
-- KEYS[1]  voucher hash    <prefix>:{t}:voucher    of the giving bucket
-- KEYS[2]  transfers hash  <prefix>:{t}:transfers  its journal
-- ARGV[1]  transfer id
-- ARGV[2]  "credited" or "fenced", as transfer_settle.lua answered
--
-- Returns "done" (credited), "returned" (fenced: the units are back here),
-- "repeated" (finished before; nothing changed) or "unknown" (no such
-- transfer in this journal; nothing changed).
if #KEYS ~= 2 or #ARGV ~= 2 then
  return redis.error_reply("transfer_finish.lua: expects 2 KEYS and 2 ARGV")
end
if ARGV[2] ~= "credited" and ARGV[2] ~= "fenced" then
  return redis.error_reply("transfer_finish.lua: the outcome must be credited or fenced")
end
local recorded = redis.call("HGET", KEYS[2], ARGV[1])
if not recorded then
  return "unknown"
end
local to, units, state = string.match(recorded, "^out|([^|]*)|(%d+)|(%a+)$")
if not state then
  return "unknown"
end
if state ~= "pending" then
  return "repeated"
end
local exists = redis.call("EXISTS", KEYS[1]) == 1
if exists then
  redis.call("HINCRBY", KEYS[1], "in_transit", -tonumber(units))
end
if ARGV[2] == "credited" then
  redis.call("HSET", KEYS[2], ARGV[1], "out|" .. to .. "|" .. units .. "|done")
  return "done"
end
if exists then
  redis.call("HINCRBY", KEYS[1], "remaining", tonumber(units))
  redis.call("HINCRBY", KEYS[1], "stock", tonumber(units))
end
redis.call("HSET", KEYS[2], ARGV[1], "out|" .. to .. "|" .. units .. "|returned")
return "returned"
